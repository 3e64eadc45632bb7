;; A slow but well-behaved guest: every filter call spins for a while (well under the
;; call deadline), so a run over many pods takes seconds; used to interrupt a run.
(module
  (memory (export "memory") 1)
  (func (export "filter") (result i32)
    (local $i i32)
    (block $done (loop $spin
      (br_if $done (i32.ge_u (local.get $i) (i32.const 3000000)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $spin)))
    (i32.const 0)))
