;; The checker guest: proves that every call of a pod's cycle reaches the instance
;; that served its prefilter, and nothing else in between.
;;
;; prefilter records the current pod's protobuf bytes; every later export fetches
;; the current pod again and traps (unreachable) if no prefilter ran since the last
;; end of cycle, or if the pod's metadata (its leading ObjectMeta field: name,
;; namespace, uid) differs from the recorded one. Only metadata: from Reserve on,
;; kube-scheduler hands the assumed pod, a copy with spec.nodeName set. postbind and unreserve
;; end the cycle. filter and score trap on purpose on a node whose name starts with
;; 'x', so tests can inject faults. Memory: recorded pod at 0x10000, current pod at
;; 0x20000, node name at 0x30000.
(module
  (import "k8s.io/scheduler" "currentPod" (func $current_pod (param i32 i32) (result i32)))
  (import "k8s.io/scheduler" "currentNodeName" (func $node_name (param i32 i32) (result i32)))
  (memory (export "memory") 4)
  (global $have (mut i32) (i32.const 0))
  (global $len (mut i32) (i32.const 0))

  (func $fetch (param $dst i32) (result i32)
    (local $n i32)
    (local.set $n (call $current_pod (local.get $dst) (i32.const 0x10000)))
    (if (i32.gt_u (local.get $n) (i32.const 0x10000)) (then unreachable))
    (local.get $n))

  ;; The length of the pod's leading metadata field: tag 0x0a, a varint length, the
  ;; ObjectMeta bytes. Traps if the pod does not start with it.
  (func $meta_len (param $p i32) (param $n i32) (result i32)
    (local $i i32) (local $len i32) (local $shift i32) (local $b i32)
    (if (i32.lt_u (local.get $n) (i32.const 2)) (then unreachable))
    (if (i32.ne (i32.load8_u (local.get $p)) (i32.const 0x0a)) (then unreachable))
    (local.set $i (i32.const 1))
    (loop $next
      (if (i32.ge_u (local.get $i) (local.get $n)) (then unreachable))
      (local.set $b (i32.load8_u (i32.add (local.get $p) (local.get $i))))
      (local.set $len (i32.or (local.get $len)
        (i32.shl (i32.and (local.get $b) (i32.const 0x7f)) (local.get $shift))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (local.set $shift (i32.add (local.get $shift) (i32.const 7)))
      (br_if $next (i32.and (local.get $b) (i32.const 0x80))))
    (local.set $len (i32.add (local.get $len) (local.get $i)))
    (if (i32.gt_u (local.get $len) (local.get $n)) (then unreachable))
    (local.get $len))

  (func $check
    (local $n i32) (local $m i32) (local $i i32)
    (if (i32.eqz (global.get $have)) (then unreachable))
    (local.set $n (call $fetch (i32.const 0x20000)))
    (local.set $m (call $meta_len (i32.const 0x20000) (local.get $n)))
    (if (i32.ne (local.get $m) (call $meta_len (i32.const 0x10000) (global.get $len))) (then unreachable))
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $m)))
      (if (i32.ne (i32.load8_u (i32.add (i32.const 0x10000) (local.get $i)))
                  (i32.load8_u (i32.add (i32.const 0x20000) (local.get $i))))
        (then unreachable))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next))))

  (func $fault_on_x_node
    (if (i32.gt_u (call $node_name (i32.const 0x30000) (i32.const 256)) (i32.const 0))
      (then (if (i32.eq (i32.load8_u (i32.const 0x30000)) (i32.const 120)) (then unreachable)))))

  (func (export "prefilter") (result i32)
    (global.set $len (call $fetch (i32.const 0x10000)))
    (global.set $have (i32.const 1))
    (i32.const 0))
  (func (export "filter") (result i32) (call $check) (call $fault_on_x_node) (i32.const 0))
  (func (export "addpod") (result i32) (call $check) (i32.const 0))
  (func (export "removepod") (result i32) (call $check) (i32.const 0))
  (func (export "postfilter") (result i64) (call $check) (i64.const 2))
  (func (export "prescore") (result i32) (call $check) (i32.const 0))
  (func (export "score") (result i64) (call $check) (call $fault_on_x_node) (i64.const 0x100000000))
  (func (export "normalizescore") (result i32) (call $check) (i32.const 0))
  (func (export "reserve") (result i32) (call $check) (i32.const 0))
  (func (export "permit") (result i64) (call $check) (i64.const 0))
  (func (export "prebind") (result i32) (call $check) (i32.const 0))
  (func (export "bind") (result i32) (call $check) (i32.const 5))
  (func (export "postbind") (call $check) (global.set $have (i32.const 0)))
  (func (export "unreserve") (call $check) (global.set $have (i32.const 0)))
)
