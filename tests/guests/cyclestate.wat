;; The cycle-state guest: what the Go SDK's own cycle-state test guest checks, at every
;; extension point this ABI has, written by hand.
;;
;; PreFilter starts a cycle: it drops the state of the last one, records the pod
;; (the SDK caches the decoded pod there) and writes the PreFilter state. Filter needs
;; the PreFilter state and no score state yet, and marks that it ran; PreScore needs
;; the PreFilter state with Filter's mark and writes the score state; Score needs it
;; and marks it; NormalizeScore needs Score's mark and answers the JSON `null`, as the
;; SDK does when the plugin returns a nil map (scores unchanged). PreBind writes the
;; bind state, Bind needs it and marks it. The scheduling-cycle exports after PreFilter
;; fetch the current pod again and compare it with the recorded one (the SDK compares
;; the cached pod's address: same cycle, same instance); the binding-cycle exports are
;; handed the assumed pod (its nodeName set), so they check only that this cycle's
;; PreFilter recorded one, as the SDK's cached pod is all they read.
;;
;; A failed check panics as a Go guest does: the message goes to stderr, then the call
;; traps. Statuses and scores are the SDK plugin's: every point returns Success, Score
;; returns 0, Permit waits 0 ms, Bind binds.
;;
;; Two checks of the SDK guest are relaxed, because they hold only when it is the sole
;; plugin: PostFilter does not need Filter's mark (when every node fails an earlier
;; plugin's filter, this guest's Filter never runs), and PostBind does not need Bind's
;; mark (the default binder binds first, so this guest's Bind is not reached).
;;
;; Memory: iovec at 0x100, messages from 0x1000, "null" at 0x2000, recorded pod at
;; 0x10000, the pod fetched again at 0x20000 (64 KiB each).
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "k8s.io/scheduler" "currentPod" (func $current_pod (param i32 i32) (result i32)))
  (import "k8s.io/scheduler" "result.normalized_score_list"
    (func $normalized_score_list (param i32 i32)))
  (memory (export "memory") 3)

  (data (i32.const 0x1000) "didn't cache pod from pre-filter\00")
  (data (i32.const 0x1040) "didn't reset score state on pre-filter\00")
  (data (i32.const 0x1080) "didn't propagate filter state from pre-filter\00")
  (data (i32.const 0x10c0) "didn't propagate state from pre-filter\00")
  (data (i32.const 0x1100) "filter value lost propagating from pre-filter\00")
  (data (i32.const 0x1140) "didn't reset score state on pre-score\00")
  (data (i32.const 0x1180) "didn't propagate score state from pre-score\00")
  (data (i32.const 0x11c0) "score value lost propagating from score-extensions\00")
  (data (i32.const 0x1200) "didn't reset pre-bind state on pre-bind\00")
  (data (i32.const 0x1240) "didn't propagate pre-bind state from pre-bind\00")
  (data (i32.const 0x1280) "pod too large for this guest\00")
  (data (i32.const 0x2000) "null")

  (global $pod_len (mut i32) (i32.const 0))
  (global $have_pod (mut i32) (i32.const 0))
  (global $prefilter_state (mut i32) (i32.const 0))
  (global $filter_mark (mut i32) (i32.const 0))
  (global $prescore_state (mut i32) (i32.const 0))
  (global $score_mark (mut i32) (i32.const 0))
  (global $normalize_mark (mut i32) (i32.const 0))
  (global $prebind_state (mut i32) (i32.const 0))
  (global $bind_mark (mut i32) (i32.const 0))

  ;; panic(msg): write the NUL-terminated message and a newline to stderr, then trap.
  (func $panic (param $msg i32)
    (local $n i32)
    (block $end (loop $scan
      (br_if $end (i32.eqz (i32.load8_u (i32.add (local.get $msg) (local.get $n)))))
      (local.set $n (i32.add (local.get $n) (i32.const 1)))
      (br $scan)))
    (i32.store (i32.const 0x100) (local.get $msg))
    (i32.store (i32.const 0x104) (local.get $n))
    (drop (call $fd_write (i32.const 2) (i32.const 0x100) (i32.const 1) (i32.const 0x108)))
    unreachable)

  (func $fetch_pod (param $dst i32) (result i32)
    (local $n i32)
    (local.set $n (call $current_pod (local.get $dst) (i32.const 0x10000)))
    (if (i32.gt_u (local.get $n) (i32.const 0x10000)) (then (call $panic (i32.const 0x1280))))
    (local.get $n))

  ;; The pod of this call is the one PreFilter recorded.
  (func $check_pod
    (local $n i32) (local $i i32)
    (if (i32.eqz (global.get $have_pod)) (then (call $panic (i32.const 0x1000))))
    (local.set $n (call $fetch_pod (i32.const 0x20000)))
    (if (i32.ne (local.get $n) (global.get $pod_len)) (then (call $panic (i32.const 0x1000))))
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (if (i32.ne (i32.load8_u (i32.add (i32.const 0x10000) (local.get $i)))
                  (i32.load8_u (i32.add (i32.const 0x20000) (local.get $i))))
        (then (call $panic (i32.const 0x1000))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next))))

  ;; Binding cycle: PreFilter of this cycle recorded the pod.
  (func $check_cached_pod
    (if (i32.eqz (global.get $have_pod)) (then (call $panic (i32.const 0x1000)))))

  ;; Score state, written after Filter, is not visible before it.
  (func $must_not_score_state
    (if (global.get $prescore_state) (then (call $panic (i32.const 0x1040)))))

  ;; State written in PreFilter and marked by Filter is still there.
  (func $must_filter_state
    (if (i32.eqz (global.get $prefilter_state)) (then (call $panic (i32.const 0x10c0))))
    (if (i32.eqz (global.get $filter_mark)) (then (call $panic (i32.const 0x1100)))))

  (func (export "enqueue"))  ;; no events: the host registers the defaults

  (func (export "prefilter") (result i32)
    ;; A new scheduling cycle: drop the last one's state and pod.
    (global.set $have_pod (i32.const 0))
    (global.set $prefilter_state (i32.const 0))
    (global.set $filter_mark (i32.const 0))
    (global.set $prescore_state (i32.const 0))
    (global.set $score_mark (i32.const 0))
    (global.set $normalize_mark (i32.const 0))
    (global.set $prebind_state (i32.const 0))
    (global.set $bind_mark (i32.const 0))
    (global.set $pod_len (call $fetch_pod (i32.const 0x10000)))
    (global.set $have_pod (i32.const 1))
    (call $must_not_score_state)
    (global.set $prefilter_state (i32.const 1))
    (i32.const 0))

  (func (export "filter") (result i32)
    (call $check_pod)
    (call $must_not_score_state)
    (if (i32.eqz (global.get $prefilter_state)) (then (call $panic (i32.const 0x1080))))
    (global.set $filter_mark (i32.const 1))
    (i32.const 0))

  (func (export "postfilter") (result i64)
    (call $check_pod)
    (call $must_not_score_state)
    (if (i32.eqz (global.get $prefilter_state)) (then (call $panic (i32.const 0x10c0))))
    (i64.const 0))  ;; Success, no nominated node: the pod stays unschedulable

  (func (export "prescore") (result i32)
    (call $check_pod)
    (call $must_filter_state)
    (if (global.get $prescore_state) (then (call $panic (i32.const 0x1140))))
    (global.set $prescore_state (i32.const 1))
    (i32.const 0))

  (func (export "score") (result i64)
    (call $check_pod)
    (call $must_filter_state)
    (if (i32.eqz (global.get $prescore_state)) (then (call $panic (i32.const 0x1180))))
    (global.set $score_mark (i32.const 1))
    (i64.const 0))  ;; Success, score 0

  (func (export "normalizescore") (result i32)
    (call $check_pod)
    (call $must_filter_state)
    (if (i32.eqz (global.get $prescore_state)) (then (call $panic (i32.const 0x1180))))
    (if (i32.eqz (global.get $score_mark)) (then (call $panic (i32.const 0x11c0))))
    (global.set $normalize_mark (i32.const 1))
    ;; json.Marshal of the nil map the plugin returned.
    (call $normalized_score_list (i32.const 0x2000) (i32.const 4))
    (i32.const 0))

  (func (export "reserve") (result i32) (i32.const 0))
  (func (export "unreserve") (call $must_filter_state))
  (func (export "permit") (result i64) (i64.const 0))

  (func (export "prebind") (result i32)
    (call $check_cached_pod)
    (if (global.get $prebind_state) (then (call $panic (i32.const 0x1200))))
    (global.set $prebind_state (i32.const 1))
    (i32.const 0))

  (func (export "bind") (result i32)
    (call $check_cached_pod)
    (if (i32.eqz (global.get $prebind_state)) (then (call $panic (i32.const 0x1240))))
    (global.set $bind_mark (i32.const 1))
    (i32.const 0))

  (func (export "postbind")
    (call $check_cached_pod)
    (if (i32.eqz (global.get $prebind_state)) (then (call $panic (i32.const 0x1240)))))
)
