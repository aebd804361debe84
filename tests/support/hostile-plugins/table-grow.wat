;; A hostile plugin that needs no compiler: a core module that grows its
;; funcref table 65,536 entries at a time for as long as the host lets it,
;; then traps. Table memory must count against the plugin's memoryMiB.
;; tests/gates/wasm/hostile.rs makes it a component of the `gate-plugin` world
;; (wit/v0.1) with wit-component at test time.
(module
  (memory (export "memory") 1)
  (table $t 1 funcref)
  (global $next (mut i32) (i32.const 1024))
  ;; A bump allocator: the host lowers the context's strings through it.
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $at i32)
    ;; align up: (next + align - 1) & -align
    (local.set $at
      (i32.and
        (i32.add (global.get $next) (i32.sub (local.get 2) (i32.const 1)))
        (i32.sub (i32.const 0) (local.get 2))))
    (global.set $next (i32.add (local.get $at) (local.get 3)))
    (if (i32.gt_u (global.get $next) (i32.mul (memory.size) (i32.const 65536)))
      (then
        (drop (memory.grow
          (i32.add
            (i32.div_u (i32.sub (global.get $next) (i32.mul (memory.size) (i32.const 65536)))
                       (i32.const 65536))
            (i32.const 1))))))
    (local.get $at))
  ;; evaluate(ctx: context) -> result<verdict, string>: the context
  ;; flattens to 15 i32s; the result is returned through a pointer.
  (func (export "evaluate")
    (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32)
    (result i32)
    (loop $grow
      (br_if $grow
        (i32.ne
          (table.grow $t (ref.null func) (i32.const 65536))
          (i32.const -1))))
    unreachable))
