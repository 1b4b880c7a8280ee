// RUN: lossgrad-opt %s | filecheck %s
// RUN: lossgrad-opt %s --print-op-generic | lossgrad-opt | filecheck %s

// The host side: the aclnn layer's l0 graph around a kernel launch.
func.func @host(%g: tensor<f32>, %x: tensor<?x?xf16>, %t: tensor<1x?xf16>, %s: f32, %d0: index, %d1: index) -> tensor<1x?xf16> {
  %b = ascendc.broadcast_to %t(%d0, %d1) : tensor<1x?xf16> -> tensor<?x?xf16>
  %y = ascendc.launch @k(%g, %x, %b) sizes(%d0, %d1) scalars(%s : f32) maps [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (0, d1)>] : tensor<f32>, tensor<?x?xf16>, tensor<?x?xf16> -> tensor<?x?xf32>
  %r = ascendc.reduce_sum %y map affine_map<(d0, d1) -> (0, d1)> : tensor<?x?xf32> -> tensor<1x?xf32>
  %h = ascendc.tensor_cast %r CAST_RINT : tensor<1x?xf32> -> tensor<1x?xf16>
  func.return %h : tensor<1x?xf16>
}

// CHECK-LABEL: func.func @host
// CHECK:         %[[B:.*]] = ascendc.broadcast_to %{{.*}}(%{{.*}}, %{{.*}}) : tensor<1x?xf16> -> tensor<?x?xf16>
// CHECK-NEXT:    %[[Y:.*]] = ascendc.launch @k(%{{.*}}, %{{.*}}, %[[B]]) sizes(%{{.*}}, %{{.*}}) scalars(%{{.*}} : f32) maps [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (0, d1)>] : tensor<f32>, tensor<?x?xf16>, tensor<?x?xf16> -> tensor<?x?xf32>
// CHECK-NEXT:    %[[R:.*]] = ascendc.reduce_sum %[[Y]] map affine_map<(d0, d1) -> (0, d1)> : tensor<?x?xf32> -> tensor<1x?xf32>
// CHECK-NEXT:    ascendc.tensor_cast %[[R]] CAST_RINT : tensor<1x?xf32> -> tensor<1x?xf16>

// One kernel with every kind of op: buffers, Init-time scalars and tiles, the three stages.
ascendc.kernel @k attributes {arg_names = ["grad_output", "self", "target", "out", "scale"], num_inputs = 3 : i64, tile_length = 4096 : i64} {
^bb0(%go: !ascendc.gm<f32>, %x: !ascendc.gm<f16>, %t: !ascendc.gm<f16>, %out: !ascendc.gm<f32>, %scale: f32):
  %qt = ascendc.queue VECIN depth 1 buffers 2 : !ascendc.queue<f16>
  %qo = ascendc.queue VECOUT depth 1 buffers 2 : !ascendc.queue<f32>
  %buf = ascendc.tbuf : !ascendc.tbuf<f32>
  %mbuf = ascendc.tbuf : !ascendc.tbuf<i1>
  %scratch = ascendc.tbuf elements 64 : !ascendc.tbuf<f32>
  %g = ascendc.get_value %go : !ascendc.gm<f32> -> f32
  %k = arith.mulf %g, %scale : f32
  %n = ascendc.tile_length
  %c64 = arith.constant 64 : index
  %sl = ascendc.get %scratch : !ascendc.tbuf<f32> -> !ascendc.local<f32>
  ascendc.duplicate %sl, %k, %c64 : !ascendc.local<f32>, f32
  ascendc.exp %sl, %sl, %c64 : !ascendc.local<f32>
  %e = ascendc.read_local %sl : !ascendc.local<f32> -> f32
  ascendc.tile_loop copy_in {
  ^bb0(%off: index, %cnt: index):
    %l = ascendc.alloc %qt : !ascendc.queue<f16> -> !ascendc.local<f16>
    ascendc.copy_in %l, %t[%off], %cnt pad : !ascendc.local<f16>, !ascendc.gm<f16>
    ascendc.enque %qt, %l : !ascendc.queue<f16>, !ascendc.local<f16>
  } compute {
  ^bb0(%off: index, %cnt: index):
    %l = ascendc.deque %qt : !ascendc.queue<f16> -> !ascendc.local<f16>
    %o = ascendc.alloc %qo : !ascendc.queue<f32> -> !ascendc.local<f32>
    %tmp = ascendc.get %buf : !ascendc.tbuf<f32> -> !ascendc.local<f32>
    %m = ascendc.get %mbuf : !ascendc.tbuf<i1> -> !ascendc.local<i1>
    %n64 = ascendc.align_up %cnt, 64
    ascendc.cast %tmp, %l CAST_NONE, %cnt : !ascendc.local<f32>, !ascendc.local<f16>
    ascendc.add %o, %tmp, %tmp, %cnt : !ascendc.local<f32>
    ascendc.sub %o, %o, %tmp, %cnt : !ascendc.local<f32>
    ascendc.mul %o, %o, %tmp, %cnt : !ascendc.local<f32>
    ascendc.div %o, %o, %tmp, %cnt : !ascendc.local<f32>
    ascendc.max %o, %o, %tmp, %cnt : !ascendc.local<f32>
    ascendc.min %o, %o, %tmp, %cnt : !ascendc.local<f32>
    ascendc.adds %o, %o, %e, %cnt : !ascendc.local<f32>, f32
    ascendc.muls %o, %o, %k, %cnt : !ascendc.local<f32>, f32
    ascendc.maxs %o, %o, %k, %cnt : !ascendc.local<f32>, f32
    ascendc.mins %o, %o, %k, %cnt : !ascendc.local<f32>, f32
    ascendc.exp %o, %o, %cnt : !ascendc.local<f32>
    ascendc.ln %o, %o, %cnt : !ascendc.local<f32>
    ascendc.abs %o, %o, %cnt : !ascendc.local<f32>
    ascendc.compare %m, %o, %tmp LT, %n64 : !ascendc.local<f32>
    ascendc.select %o, %m, %o, %tmp, %n64 : !ascendc.local<f32>
    ascendc.compares %m, %o, %k NE, %n64 : !ascendc.local<f32>, f32
    ascendc.selects %o, %m, %o, %k, %n64 : !ascendc.local<f32>, f32
    ascendc.enque %qo, %o : !ascendc.queue<f32>, !ascendc.local<f32>
    ascendc.free %qt, %l : !ascendc.queue<f16>, !ascendc.local<f16>
  } copy_out {
  ^bb0(%off: index, %cnt: index):
    %o = ascendc.deque %qo : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.copy_out %out[%off], %o, %cnt : !ascendc.gm<f32>, !ascendc.local<f32>
    ascendc.free %qo, %o : !ascendc.queue<f32>, !ascendc.local<f32>
  }
}

// CHECK-LABEL: ascendc.kernel @k attributes {arg_names = ["grad_output", "self", "target", "out", "scale"], num_inputs = 3 : i64, tile_length = 4096 : i64} {
// CHECK:         ascendc.queue VECIN depth 1 buffers 2 : !ascendc.queue<f16>
// CHECK:         ascendc.queue VECOUT depth 1 buffers 2 : !ascendc.queue<f32>
// CHECK:         ascendc.tbuf : !ascendc.tbuf<f32>
// CHECK:         ascendc.tbuf : !ascendc.tbuf<i1>
// CHECK:         ascendc.tbuf elements 64 : !ascendc.tbuf<f32>
// CHECK:         ascendc.get_value %{{.*}} : !ascendc.gm<f32> -> f32
// CHECK:         ascendc.tile_length
// CHECK:         ascendc.read_local %{{.*}} : !ascendc.local<f32> -> f32
// CHECK:         ascendc.tile_loop copy_in {
// CHECK:           ascendc.copy_in %{{.*}}, %{{.*}}[%{{.*}}], %{{.*}} pad : !ascendc.local<f16>, !ascendc.gm<f16>
// CHECK:         } compute {
// CHECK:           ascendc.align_up %{{.*}}, 64
// CHECK:           ascendc.cast %{{.*}}, %{{.*}} CAST_NONE, %{{.*}} : !ascendc.local<f32>, !ascendc.local<f16>
// CHECK:           ascendc.maxs
// CHECK:           ascendc.abs
// CHECK:           ascendc.compare %{{.*}}, %{{.*}}, %{{.*}} LT, %{{.*}} : !ascendc.local<f32>
// CHECK:           ascendc.select %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : !ascendc.local<f32>
// CHECK:           ascendc.compares %{{.*}}, %{{.*}}, %{{.*}} NE, %{{.*}} : !ascendc.local<f32>, f32
// CHECK:           ascendc.selects %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : !ascendc.local<f32>, f32
// CHECK:         } copy_out {
// CHECK:           ascendc.copy_out %{{.*}}[%{{.*}}], %{{.*}}, %{{.*}} : !ascendc.gm<f32>, !ascendc.local<f32>
