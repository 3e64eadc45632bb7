;; The chaos guest: on every call, with small probabilities drawn from WASI random_get,
;; it loops forever, traps, grows its memory without bound, hands the host a pointer
;; outside its memory, or (in normalizescore) returns malformed JSON. Otherwise it
;; behaves: filter and permit allow, score gives 50, bind answers Skip.
(module
  (import "wasi_snapshot_preview1" "random_get" (func $random_get (param i32 i32) (result i32)))
  (import "k8s.io/scheduler" "currentPod" (func $current_pod (param i32 i32) (result i32)))
  (import "k8s.io/scheduler" "result.normalized_score_list" (func $scores (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 64) "{not json")

  (func $roll (result i32)
    (drop (call $random_get (i32.const 0) (i32.const 4)))
    (i32.rem_u (i32.load (i32.const 0)) (i32.const 1000)))

  (func $chaos
    (local $r i32)
    (local.set $r (call $roll))
    (if (i32.lt_u (local.get $r) (i32.const 2)) (then (loop $forever (br $forever))))
    (if (i32.lt_u (local.get $r) (i32.const 12)) (then unreachable))
    (if (i32.lt_u (local.get $r) (i32.const 17)) (then
      (loop $grow (br_if $grow (i32.ne (memory.grow (i32.const 64)) (i32.const -1))))
      unreachable))
    (if (i32.lt_u (local.get $r) (i32.const 22)) (then
      (drop (call $current_pod (i32.const 0xFFFFFF00) (i32.const 0x1000))))))

  (func (export "prefilter") (result i32) (call $chaos) (i32.const 0))
  (func (export "filter") (result i32) (call $chaos) (i32.const 0))
  (func (export "prescore") (result i32) (call $chaos) (i32.const 0))
  (func (export "score") (result i64) (call $chaos) (i64.const 0x3200000000))
  (func (export "normalizescore") (result i32)
    (call $chaos)
    (if (i32.lt_u (call $roll) (i32.const 50)) (then (call $scores (i32.const 64) (i32.const 9))))
    (i32.const 0))
  (func (export "reserve") (result i32) (call $chaos) (i32.const 0))
  (func (export "permit") (result i64) (call $chaos) (i64.const 0))
  (func (export "prebind") (result i32) (call $chaos) (i32.const 0))
  (func (export "bind") (result i32) (call $chaos) (i32.const 5))
  (func (export "postbind") (call $chaos))
  (func (export "unreserve") (call $chaos))
)
