// RUN: lossgrad-opt %s -p ascendc-plan-buffers | filecheck %s
// RUN: lossgrad-opt %s -p 'ascendc-plan-buffers{soc=ascend950}' | filecheck %s --check-prefix=A950
// RUN: lossgrad-opt %s -p 'ascendc-plan-buffers{ub_bytes=65536}' | filecheck %s --check-prefix=SMALL

// exp(t) * g * s: the first temp goes into t's dequeued buffer (t dies there: in place),
// the product into g's, and the scaled result is written straight into the output tile.
// No TBuf is needed, so two inputs and the output (each double-buffered f32) share the UB:
// 196608 / (3 * 2 * 4) = 8192 elements.
ascendc.kernel @k attributes {arg_names = ["grad_output", "self", "target", "out", "scale"], num_inputs = 3 : i64} {
^bb0(%go: !ascendc.gm<f32>, %x: !ascendc.gm<f32>, %t: !ascendc.gm<f32>, %out: !ascendc.gm<f32>, %s: f32):
  %qg = ascendc.queue VECIN depth 1 buffers 2 : !ascendc.queue<f32>
  %qt = ascendc.queue VECIN depth 1 buffers 2 : !ascendc.queue<f32>
  %qo = ascendc.queue VECOUT depth 1 buffers 2 : !ascendc.queue<f32>
  ascendc.tile_loop copy_in {
  ^bb0(%off: index, %n: index):
    %lg = ascendc.alloc %qg : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.copy_in %lg, %go[%off], %n pad : !ascendc.local<f32>, !ascendc.gm<f32>
    ascendc.enque %qg, %lg : !ascendc.queue<f32>, !ascendc.local<f32>
    %lt = ascendc.alloc %qt : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.copy_in %lt, %t[%off], %n pad : !ascendc.local<f32>, !ascendc.gm<f32>
    ascendc.enque %qt, %lt : !ascendc.queue<f32>, !ascendc.local<f32>
  } compute {
  ^bb0(%off: index, %n: index):
    %g = ascendc.deque %qg : !ascendc.queue<f32> -> !ascendc.local<f32>
    %tt = ascendc.deque %qt : !ascendc.queue<f32> -> !ascendc.local<f32>
    %o = ascendc.alloc %qo : !ascendc.queue<f32> -> !ascendc.local<f32>
    %e = ascendc.temp : !ascendc.local<f32>
    ascendc.exp %e, %tt, %n : !ascendc.local<f32>
    %p = ascendc.temp : !ascendc.local<f32>
    ascendc.mul %p, %g, %e, %n : !ascendc.local<f32>
    ascendc.muls %o, %p, %s, %n : !ascendc.local<f32>, f32
    ascendc.enque %qo, %o : !ascendc.queue<f32>, !ascendc.local<f32>
    ascendc.free %qg, %g : !ascendc.queue<f32>, !ascendc.local<f32>
    ascendc.free %qt, %tt : !ascendc.queue<f32>, !ascendc.local<f32>
  } copy_out {
  ^bb0(%off: index, %n: index):
    %r = ascendc.deque %qo : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.copy_out %out[%off], %r, %n pad : !ascendc.gm<f32>, !ascendc.local<f32>
    ascendc.free %qo, %r : !ascendc.queue<f32>, !ascendc.local<f32>
  }
}

// CHECK:       ascendc.kernel @k attributes {{{.*}}tile_length = 8192 : i64, ub_bytes = 196608 : i64, ub_capacity = 196608 : i64, soc = "ascend910b"}
// CHECK-NOT:   ascendc.tbuf
// CHECK:       } compute {
// CHECK-NEXT:  ^bb0(%{{.*}}: index, %[[N:.*]]: index):
// CHECK-NEXT:    %[[G:.*]] = ascendc.deque
// CHECK-NEXT:    %[[T:.*]] = ascendc.deque
// CHECK-NEXT:    %[[O:.*]] = ascendc.alloc
// CHECK-NEXT:    ascendc.exp %[[T]], %[[T]], %[[N]] : !ascendc.local<f32>
// CHECK-NEXT:    ascendc.mul %[[G]], %[[G]], %[[T]], %[[N]] : !ascendc.local<f32>
// CHECK-NEXT:    ascendc.muls %[[O]], %[[G]], %{{.*}}, %[[N]] : !ascendc.local<f32>, f32
// CHECK-NOT:   ascendc.temp

// A950: tile_length = 10560 : i64, ub_bytes = 253440 : i64, ub_capacity = 253952 : i64, soc = "ascend950"
// SMALL: tile_length = 2688 : i64, ub_bytes = 64512 : i64, ub_capacity = 65536 : i64
