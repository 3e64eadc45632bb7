;; NodeNumber: a kube-scheduler plugin, hand-written in WebAssembly text.
;;
;; It favours nodes whose name ends in the same digit as the pod's name ("web-3" on
;; "node-13" scores 100, on "node-12" 0), and it proves that cycle state lives in the
;; instance from PreScore to Score: PreScore reads the pod (protobuf v1.Pod through
;; the buffer protocol), parses metadata.name and keeps its last digit in a global;
;; Score reads it back. PreFilter resets the state at the start of every scheduling
;; cycle, so a Score without this cycle's PreScore is an Error.
;;
;; Memory: 0x0100.. messages, 0x1000 (256 bytes) the node name, 0x10000.. to the end
;; of memory a large buffer (grown when the host says a value does not fit).
(module
  (import "k8s.io/scheduler" "currentPod" (func $current_pod (param i32 i32) (result i32)))
  (import "k8s.io/scheduler" "currentNodeName" (func $current_node_name (param i32 i32) (result i32)))
  (import "k8s.io/scheduler" "result.status_reason" (func $status_reason (param i32 i32)))
  (import "k8s.io/klog" "log" (func $klog (param i32 i32 i32)))

  (memory (export "memory") 2)

  (data (i32.const 0x100) "NodeNumber: no cycle state (prescore did not run)")
  (data (i32.const 0x200) "NodeNumber: pod name ends in digit ?")
  (data (i32.const 0x280) "NodeNumber: pod name does not end in a digit")

  ;; The cycle state: -1 none (PreScore has not run in this cycle), 0..9 the pod
  ;; name's last digit, 10 the pod name does not end in a digit.
  (global $state (mut i32) (i32.const -1))

  ;; Protobuf reader: the next byte, the end of the current message, an error flag.
  (global $pos (mut i32) (i32.const 0))
  (global $end (mut i32) (i32.const 0))
  (global $bad (mut i32) (i32.const 0))

  ;; Where the last node name was written.
  (global $name_ptr (mut i32) (i32.const 0x1000))

  (func (export "_start"))

  ;; --- the large buffer ---------------------------------------------------------------

  (func $big_limit (result i32)
    (i32.sub (i32.mul (memory.size) (i32.const 65536)) (i32.const 0x10000)))

  ;; Grows memory until the large buffer holds $n bytes; 0 if memory cannot grow.
  (func $ensure_big (param $n i32) (result i32)
    (local $short i32)
    (local.set $short (i32.sub (local.get $n) (call $big_limit)))
    (if (i32.le_s (local.get $short) (i32.const 0)) (then (return (i32.const 1))))
    (i32.ne
      (memory.grow (i32.div_u (i32.add (local.get $short) (i32.const 65535)) (i32.const 65536)))
      (i32.const -1)))

  ;; The current pod's bytes into the large buffer (buffer protocol); its size, 0 if none.
  (func $fetch_pod (result i32)
    (local $n i32)
    (local.set $n (call $current_pod (i32.const 0x10000) (call $big_limit)))
    (if (i32.gt_u (local.get $n) (call $big_limit))
      (then
        (if (i32.eqz (call $ensure_big (local.get $n))) (then (return (i32.const 0))))
        (local.set $n (call $current_pod (i32.const 0x10000) (call $big_limit)))
        (if (i32.gt_u (local.get $n) (call $big_limit)) (then (return (i32.const 0))))))
    (local.get $n))

  ;; The current node's name at $name_ptr; its length, 0 if none.
  (func $fetch_node_name (result i32)
    (local $n i32)
    (global.set $name_ptr (i32.const 0x1000))
    (local.set $n (call $current_node_name (i32.const 0x1000) (i32.const 256)))
    (if (i32.gt_u (local.get $n) (i32.const 256))
      (then
        (if (i32.eqz (call $ensure_big (local.get $n))) (then (return (i32.const 0))))
        (global.set $name_ptr (i32.const 0x10000))
        (local.set $n (call $current_node_name (i32.const 0x10000) (call $big_limit)))
        (if (i32.gt_u (local.get $n) (call $big_limit)) (then (return (i32.const 0))))))
    (local.get $n))

  ;; --- protobuf -----------------------------------------------------------------------

  ;; A varint at $pos (up to 10 bytes); sets $bad when it runs past $end.
  (func $varint (result i64)
    (local $value i64) (local $shift i64) (local $byte i32)
    (block $done
      (loop $next
        (if (i32.ge_u (global.get $pos) (global.get $end))
          (then (global.set $bad (i32.const 1)) (br $done)))
        (if (i64.ge_u (local.get $shift) (i64.const 64))
          (then (global.set $bad (i32.const 1)) (br $done)))
        (local.set $byte (i32.load8_u (global.get $pos)))
        (global.set $pos (i32.add (global.get $pos) (i32.const 1)))
        (local.set $value
          (i64.or (local.get $value)
                  (i64.shl (i64.extend_i32_u (i32.and (local.get $byte) (i32.const 0x7f))) (local.get $shift))))
        (local.set $shift (i64.add (local.get $shift) (i64.const 7)))
        (br_if $next (i32.and (local.get $byte) (i32.const 0x80)))))
    (local.get $value))

  ;; Moves $pos on by $n bytes; sets $bad when that passes $end.
  (func $advance (param $n i64)
    (if (i64.gt_u (local.get $n) (i64.extend_i32_u (i32.sub (global.get $end) (global.get $pos))))
      (then (global.set $bad (i32.const 1)) (global.set $pos (global.get $end)) (return)))
    (global.set $pos (i32.add (global.get $pos) (i32.wrap_i64 (local.get $n)))))

  ;; Skips a field's value of wire type $type (groups are not valid here: $bad).
  (func $skip (param $type i32)
    (if (i32.eq (local.get $type) (i32.const 0)) (then (drop (call $varint)) (return)))
    (if (i32.eq (local.get $type) (i32.const 1)) (then (call $advance (i64.const 8)) (return)))
    (if (i32.eq (local.get $type) (i32.const 2)) (then (call $advance (call $varint)) (return)))
    (if (i32.eq (local.get $type) (i32.const 5)) (then (call $advance (i64.const 4)) (return)))
    (global.set $bad (i32.const 1)))

  ;; Finds length-delimited field $field in the message from $pos to $end, skipping the
  ;; others; on success 1, with $pos..$end narrowed to the field's bytes; else 0.
  (func $find (param $field i32) (result i32)
    (local $tag i64) (local $len i64)
    (block $missing
      (loop $next
        (br_if $missing (i32.ge_u (global.get $pos) (global.get $end)))
        (local.set $tag (call $varint))
        (br_if $missing (global.get $bad))
        (if (i64.eq (local.get $tag)
                    (i64.extend_i32_u (i32.or (i32.shl (local.get $field) (i32.const 3)) (i32.const 2))))
          (then
            (local.set $len (call $varint))
            (br_if $missing (global.get $bad))
            (br_if $missing
              (i64.gt_u (local.get $len) (i64.extend_i32_u (i32.sub (global.get $end) (global.get $pos)))))
            (global.set $end (i32.add (global.get $pos) (i32.wrap_i64 (local.get $len))))
            (return (i32.const 1))))
        (call $skip (i32.wrap_i64 (i64.and (local.get $tag) (i64.const 7))))
        (br_if $missing (global.get $bad))
        (br $next)))
    (i32.const 0))

  ;; --- extension points ---------------------------------------------------------------

  ;; A new scheduling cycle: forget the last pod.
  (func (export "prefilter") (result i32)
    (global.set $state (i32.const -1))
    (i32.const 0))

  ;; Keep the last digit of the pod's metadata.name (v1.Pod field 1 ObjectMeta, its field 1).
  (func (export "prescore") (result i32)
    (local $n i32) (local $last i32)
    (global.set $state (i32.const 10))
    (local.set $n (call $fetch_pod))
    (global.set $bad (i32.const 0))
    (global.set $pos (i32.const 0x10000))
    (global.set $end (i32.add (i32.const 0x10000) (local.get $n)))
    (if (call $find (i32.const 1))
      (then
        (if (call $find (i32.const 1))
          (then
            (if (i32.gt_u (global.get $end) (global.get $pos))
              (then
                (local.set $last (i32.load8_u (i32.sub (global.get $end) (i32.const 1))))
                (if (i32.and (i32.ge_u (local.get $last) (i32.const 48)) (i32.le_u (local.get $last) (i32.const 57)))
                  (then (global.set $state (i32.sub (local.get $last) (i32.const 48)))))))))))
    (if (i32.lt_u (global.get $state) (i32.const 10))
      (then
        (i32.store8 (i32.const 0x223) (i32.add (global.get $state) (i32.const 48)))
        (call $klog (i32.const 0) (i32.const 0x200) (i32.const 36)))
      (else (call $klog (i32.const 0) (i32.const 0x280) (i32.const 44))))
    (i32.const 0))

  ;; 100 for a node whose name ends in the kept digit, else 0 (i64: score << 32 | status).
  (func (export "score") (result i64)
    (local $n i32)
    (if (i32.eq (global.get $state) (i32.const -1))
      (then
        (call $status_reason (i32.const 0x100) (i32.const 49))
        (return (i64.const 1))))
    (if (i32.eq (global.get $state) (i32.const 10)) (then (return (i64.const 0))))
    (local.set $n (call $fetch_node_name))
    (if (i32.eqz (local.get $n)) (then (return (i64.const 0))))
    (if (i32.eq (i32.load8_u (i32.add (global.get $name_ptr) (i32.sub (local.get $n) (i32.const 1))))
                (i32.add (global.get $state) (i32.const 48)))
      (then (return (i64.shl (i64.const 100) (i64.const 32)))))
    (i64.const 0))
)
