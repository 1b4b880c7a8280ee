// RUN: lossgrad-opt %s --split-input-file -p ascendc-plan-buffers | filecheck %s

// Ascend C allows at most 8 queue buffers per position. Five tile inputs cannot all be
// double-buffered (10 > 8), so each VECIN queue gets one buffer; the one VECOUT queue keeps
// two. The tile length counts what is planned: 5 * 1 + 1 * 2 f32 buffers = 28 bytes per
// element, 196608 / 28 rounded down to 64 elements = 6976.
ascendc.kernel @five attributes {arg_names = ["grad_output", "self", "target", "weight", "pos_weight", "out"], num_inputs = 5 : i64} {
^bb0(%a0: !ascendc.gm<f32>, %a1: !ascendc.gm<f32>, %a2: !ascendc.gm<f32>, %a3: !ascendc.gm<f32>, %a4: !ascendc.gm<f32>, %out: !ascendc.gm<f32>):
  %q0 = ascendc.queue VECIN depth 1 buffers 2 : !ascendc.queue<f32>
  %q1 = ascendc.queue VECIN depth 1 buffers 2 : !ascendc.queue<f32>
  %q2 = ascendc.queue VECIN depth 1 buffers 2 : !ascendc.queue<f32>
  %q3 = ascendc.queue VECIN depth 1 buffers 2 : !ascendc.queue<f32>
  %q4 = ascendc.queue VECIN depth 1 buffers 2 : !ascendc.queue<f32>
  %qo = ascendc.queue VECOUT depth 1 buffers 2 : !ascendc.queue<f32>
  ascendc.tile_loop copy_in {
  ^bb0(%off: index, %n: index):
    %l0 = ascendc.alloc %q0 : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.copy_in %l0, %a0[%off], %n pad : !ascendc.local<f32>, !ascendc.gm<f32>
    ascendc.enque %q0, %l0 : !ascendc.queue<f32>, !ascendc.local<f32>
    %l1 = ascendc.alloc %q1 : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.copy_in %l1, %a1[%off], %n pad : !ascendc.local<f32>, !ascendc.gm<f32>
    ascendc.enque %q1, %l1 : !ascendc.queue<f32>, !ascendc.local<f32>
    %l2 = ascendc.alloc %q2 : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.copy_in %l2, %a2[%off], %n pad : !ascendc.local<f32>, !ascendc.gm<f32>
    ascendc.enque %q2, %l2 : !ascendc.queue<f32>, !ascendc.local<f32>
    %l3 = ascendc.alloc %q3 : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.copy_in %l3, %a3[%off], %n pad : !ascendc.local<f32>, !ascendc.gm<f32>
    ascendc.enque %q3, %l3 : !ascendc.queue<f32>, !ascendc.local<f32>
    %l4 = ascendc.alloc %q4 : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.copy_in %l4, %a4[%off], %n pad : !ascendc.local<f32>, !ascendc.gm<f32>
    ascendc.enque %q4, %l4 : !ascendc.queue<f32>, !ascendc.local<f32>
  } compute {
  ^bb0(%off: index, %n: index):
    %t0 = ascendc.deque %q0 : !ascendc.queue<f32> -> !ascendc.local<f32>
    %t1 = ascendc.deque %q1 : !ascendc.queue<f32> -> !ascendc.local<f32>
    %t2 = ascendc.deque %q2 : !ascendc.queue<f32> -> !ascendc.local<f32>
    %t3 = ascendc.deque %q3 : !ascendc.queue<f32> -> !ascendc.local<f32>
    %t4 = ascendc.deque %q4 : !ascendc.queue<f32> -> !ascendc.local<f32>
    %o = ascendc.alloc %qo : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.add %o, %t0, %t1, %n : !ascendc.local<f32>
    ascendc.add %o, %o, %t2, %n : !ascendc.local<f32>
    ascendc.add %o, %o, %t3, %n : !ascendc.local<f32>
    ascendc.add %o, %o, %t4, %n : !ascendc.local<f32>
    ascendc.enque %qo, %o : !ascendc.queue<f32>, !ascendc.local<f32>
    ascendc.free %q0, %t0 : !ascendc.queue<f32>, !ascendc.local<f32>
    ascendc.free %q1, %t1 : !ascendc.queue<f32>, !ascendc.local<f32>
    ascendc.free %q2, %t2 : !ascendc.queue<f32>, !ascendc.local<f32>
    ascendc.free %q3, %t3 : !ascendc.queue<f32>, !ascendc.local<f32>
    ascendc.free %q4, %t4 : !ascendc.queue<f32>, !ascendc.local<f32>
  } copy_out {
  ^bb0(%off: index, %n: index):
    %r = ascendc.deque %qo : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.copy_out %out[%off], %r, %n pad : !ascendc.gm<f32>, !ascendc.local<f32>
    ascendc.free %qo, %r : !ascendc.queue<f32>, !ascendc.local<f32>
  }
}
// CHECK:      ascendc.kernel @five attributes {{{.*}}tile_length = 6976 : i64, ub_bytes = 195328 : i64
// CHECK-NEXT: ^bb0(
// CHECK-NEXT:   ascendc.queue VECIN depth 1 buffers 1
// CHECK-NEXT:   ascendc.queue VECIN depth 1 buffers 1
// CHECK-NEXT:   ascendc.queue VECIN depth 1 buffers 1
// CHECK-NEXT:   ascendc.queue VECIN depth 1 buffers 1
// CHECK-NEXT:   ascendc.queue VECIN depth 1 buffers 1
// CHECK-NEXT:   ascendc.queue VECOUT depth 1 buffers 2

// -----

// Four tile inputs fill the VECIN limit exactly with double buffering (4 * 2 = 8): the
// queues keep their two buffers; (4 * 2 + 2) * 4 = 40 bytes per element, tile 4864.
ascendc.kernel @four attributes {arg_names = ["grad_output", "self", "target", "weight", "out"], num_inputs = 4 : i64} {
^bb0(%a0: !ascendc.gm<f32>, %a1: !ascendc.gm<f32>, %a2: !ascendc.gm<f32>, %a3: !ascendc.gm<f32>, %out: !ascendc.gm<f32>):
  %q0 = ascendc.queue VECIN depth 1 buffers 2 : !ascendc.queue<f32>
  %q1 = ascendc.queue VECIN depth 1 buffers 2 : !ascendc.queue<f32>
  %q2 = ascendc.queue VECIN depth 1 buffers 2 : !ascendc.queue<f32>
  %q3 = ascendc.queue VECIN depth 1 buffers 2 : !ascendc.queue<f32>
  %qo = ascendc.queue VECOUT depth 1 buffers 2 : !ascendc.queue<f32>
  ascendc.tile_loop copy_in {
  ^bb0(%off: index, %n: index):
    %l0 = ascendc.alloc %q0 : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.copy_in %l0, %a0[%off], %n pad : !ascendc.local<f32>, !ascendc.gm<f32>
    ascendc.enque %q0, %l0 : !ascendc.queue<f32>, !ascendc.local<f32>
    %l1 = ascendc.alloc %q1 : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.copy_in %l1, %a1[%off], %n pad : !ascendc.local<f32>, !ascendc.gm<f32>
    ascendc.enque %q1, %l1 : !ascendc.queue<f32>, !ascendc.local<f32>
    %l2 = ascendc.alloc %q2 : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.copy_in %l2, %a2[%off], %n pad : !ascendc.local<f32>, !ascendc.gm<f32>
    ascendc.enque %q2, %l2 : !ascendc.queue<f32>, !ascendc.local<f32>
    %l3 = ascendc.alloc %q3 : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.copy_in %l3, %a3[%off], %n pad : !ascendc.local<f32>, !ascendc.gm<f32>
    ascendc.enque %q3, %l3 : !ascendc.queue<f32>, !ascendc.local<f32>
  } compute {
  ^bb0(%off: index, %n: index):
    %t0 = ascendc.deque %q0 : !ascendc.queue<f32> -> !ascendc.local<f32>
    %t1 = ascendc.deque %q1 : !ascendc.queue<f32> -> !ascendc.local<f32>
    %t2 = ascendc.deque %q2 : !ascendc.queue<f32> -> !ascendc.local<f32>
    %t3 = ascendc.deque %q3 : !ascendc.queue<f32> -> !ascendc.local<f32>
    %o = ascendc.alloc %qo : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.add %o, %t0, %t1, %n : !ascendc.local<f32>
    ascendc.add %o, %o, %t2, %n : !ascendc.local<f32>
    ascendc.add %o, %o, %t3, %n : !ascendc.local<f32>
    ascendc.enque %qo, %o : !ascendc.queue<f32>, !ascendc.local<f32>
    ascendc.free %q0, %t0 : !ascendc.queue<f32>, !ascendc.local<f32>
    ascendc.free %q1, %t1 : !ascendc.queue<f32>, !ascendc.local<f32>
    ascendc.free %q2, %t2 : !ascendc.queue<f32>, !ascendc.local<f32>
    ascendc.free %q3, %t3 : !ascendc.queue<f32>, !ascendc.local<f32>
  } copy_out {
  ^bb0(%off: index, %n: index):
    %r = ascendc.deque %qo : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.copy_out %out[%off], %r, %n pad : !ascendc.gm<f32>, !ascendc.local<f32>
    ascendc.free %qo, %r : !ascendc.queue<f32>, !ascendc.local<f32>
  }
}
// CHECK:      ascendc.kernel @four attributes {{{.*}}tile_length = 4864 : i64, ub_bytes = 194560 : i64
// CHECK-NEXT: ^bb0(
// CHECK-NEXT:   ascendc.queue VECIN depth 1 buffers 2
// CHECK-NEXT:   ascendc.queue VECIN depth 1 buffers 2
// CHECK-NEXT:   ascendc.queue VECIN depth 1 buffers 2
// CHECK-NEXT:   ascendc.queue VECIN depth 1 buffers 2
// CHECK-NEXT:   ascendc.queue VECOUT depth 1 buffers 2
