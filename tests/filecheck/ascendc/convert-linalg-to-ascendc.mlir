// RUN: lossgrad-opt %s -p convert-linalg-to-ascendc | filecheck %s
// RUN: lossgrad-opt %s -p convert-linalg-to-ascendc,ascendc-plan-buffers | filecheck %s --check-prefix=PLAN

// Level-2 IR (docs/level2.md) of three signatures, as lower-lossgrad prints it.
func.func @kl(%g: tensor<f32>, %x: tensor<?x?xf32>, %t: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %dim = tensor.dim %x, %c0 : tensor<?x?xf32>
  %n_i64 = arith.index_cast %dim : index to i64
  %n = arith.uitofp %n_i64 : i64 to f32
  %one = arith.constant 1.000000e+00 : f32
  %scale = arith.divf %one, %n : f32
  %c1 = arith.constant 1 : index
  %dim_1 = tensor.dim %x, %c1 : tensor<?x?xf32>
  %init = tensor.empty(%dim, %dim_1) : tensor<?x?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%g, %x, %t : tensor<f32>, tensor<?x?xf32>, tensor<?x?xf32>) outs(%init : tensor<?x?xf32>) {
  ^bb0(%0: f32, %1: f32, %2: f32, %3: f32):
    %4 = arith.mulf %0, %scale : f32
    %5 = arith.mulf %4, %2 : f32
    %6 = arith.negf %5 : f32
    linalg.yield %6 : f32
  } -> tensor<?x?xf32>
  func.return %r : tensor<?x?xf32>
}
func.func @kltarget(%g: tensor<?x?xf16>, %x: tensor<?x?xf16>, %t: tensor<1x?xf16>) -> tensor<1x?xf16> {
  %c1 = arith.constant 1 : index
  %dim = tensor.dim %t, %c1 : tensor<1x?xf16>
  %init = tensor.empty(%dim) : tensor<1x?xf32>
  %zero = arith.constant 0.000000e+00 : f32
  %zeros = linalg.fill ins(%zero : f32) outs(%init : tensor<1x?xf32>) -> tensor<1x?xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (0, d1)>, affine_map<(d0, d1) -> (0, d1)>], iterator_types = ["reduction", "parallel"]} ins(%g, %x, %t : tensor<?x?xf16>, tensor<?x?xf16>, tensor<1x?xf16>) outs(%zeros : tensor<1x?xf32>) {
  ^bb0(%0: f16, %1: f16, %2: f16, %3: f32):
    %4 = arith.extf %0 : f16 to f32
    %5 = arith.extf %1 : f16 to f32
    %6 = arith.extf %2 : f16 to f32
    %7 = arith.constant 1.000000e+00 : f32
    %8 = math.log %6 : f32
    %9 = arith.addf %8, %7 : f32
    %10 = arith.subf %9, %5 : f32
    %11 = arith.mulf %4, %10 : f32
    %12 = arith.constant 0.000000e+00 : f32
    %13 = arith.cmpf oeq, %6, %12 : f32
    %14 = arith.select %13, %12, %11 : f32
    %15 = arith.addf %3, %14 : f32
    linalg.yield %15 : f32
  } -> tensor<1x?xf32>
  %init_1 = tensor.empty(%dim) : tensor<1x?xf16>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%sum : tensor<1x?xf32>) outs(%init_1 : tensor<1x?xf16>) {
  ^bb0(%16: f32, %17: f16):
    %18 = arith.truncf %16 : f32 to f16
    linalg.yield %18 : f16
  } -> tensor<1x?xf16>
  func.return %r : tensor<1x?xf16>
}
func.func @smoothl1(%g: tensor<?xf32>, %x: tensor<?xbf16>, %t: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %dim = tensor.dim %x, %c0 : tensor<?xbf16>
  %init = tensor.empty(%dim) : tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%g, %x, %t : tensor<?xf32>, tensor<?xbf16>, tensor<?xf32>) outs(%init : tensor<?xf32>) {
  ^bb0(%0: f32, %1: bf16, %2: f32, %3: f32):
    %4 = arith.extf %1 : bf16 to f32
    %5 = arith.constant 1.000000e+00 : f32
    %6 = arith.constant -1.000000e+00 : f32
    %7 = arith.subf %4, %2 : f32
    %8 = arith.constant 3.000000e+00 : f32
    %9 = arith.divf %7, %8 : f32
    %10 = arith.cmpf olt, %9, %6 : f32
    %11 = arith.select %10, %6, %9 : f32
    %12 = arith.cmpf ogt, %9, %5 : f32
    %13 = arith.select %12, %5, %11 : f32
    %14 = arith.mulf %0, %13 : f32
    linalg.yield %14 : f32
  } -> tensor<?xf32>
  func.return %r : tensor<?xf32>
}

func.func @kltarget_log(%g: tensor<?xf32>, %x: tensor<?xf32>, %t: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %dim = tensor.dim %x, %c0 : tensor<?xf32>
  %n_i64 = arith.index_cast %dim : index to i64
  %n = arith.uitofp %n_i64 : i64 to f32
  %one = arith.constant 1.000000e+00 : f32
  %scale = arith.divf %one, %n : f32
  %init = tensor.empty(%dim) : tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%g, %x, %t : tensor<?xf32>, tensor<?xf32>, tensor<?xf32>) outs(%init : tensor<?xf32>) {
  ^bb0(%0: f32, %1: f32, %2: f32, %3: f32):
    %4 = arith.mulf %0, %scale : f32
    %5 = math.exp %2 : f32
    %6 = arith.subf %2, %1 : f32
    %7 = arith.mulf %4, %6 : f32
    %8 = arith.mulf %7, %5 : f32
    %9 = arith.mulf %4, %5 : f32
    %10 = arith.addf %8, %9 : f32
    linalg.yield %10 : f32
  } -> tensor<?xf32>
  func.return %r : tensor<?xf32>
}

// KlDivBackward, batchmean, scalar grad_output: the scale is a tiling scalar, -(g*s) is
// computed once in Init, and the tile needs one Muls.
// CHECK-LABEL: func.func @kl(
// CHECK:         %[[SCALE:.*]] = arith.divf %{{.*}}, %{{.*}} : f32
// CHECK:         %[[D0:.*]] = tensor.dim %{{.*}}, %{{.*}} : tensor<?x?xf32>
// CHECK:         %[[D1:.*]] = tensor.dim %{{.*}}, %{{.*}} : tensor<?x?xf32>
// CHECK-NOT:     ascendc.broadcast_to
// CHECK:         %[[R:.*]] = ascendc.launch @kl_kernel(%{{.*}}, %{{.*}}, %{{.*}}) sizes(%[[D0]], %[[D1]]) scalars(%[[SCALE]] : f32) maps [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] : tensor<f32>, tensor<?x?xf32>, tensor<?x?xf32> -> tensor<?x?xf32>
// CHECK-NOT:     linalg.generic
// CHECK:         func.return %[[R]]
// CHECK-LABEL: ascendc.kernel @kl_kernel attributes {arg_names = ["grad_output", "self", "target", "out", "scale"], num_inputs = 3 : i64} {
// CHECK-NEXT:  ^bb0(%[[G:.*]]: !ascendc.gm<f32>, %{{.*}}: !ascendc.gm<f32>, %[[T:.*]]: !ascendc.gm<f32>, %[[OUT:.*]]: !ascendc.gm<f32>, %[[S:.*]]: f32):
// CHECK-NEXT:    %[[GV:.*]] = ascendc.get_value %[[G]] : !ascendc.gm<f32> -> f32
// CHECK-NEXT:    %[[QT:.*]] = ascendc.queue VECIN depth 1 buffers 2 : !ascendc.queue<f32>
// CHECK-NEXT:    %[[QO:.*]] = ascendc.queue VECOUT depth 1 buffers 2 : !ascendc.queue<f32>
// CHECK-NEXT:    %[[GE:.*]] = arith.mulf %[[GV]], %[[S]] : f32
// CHECK-NEXT:    %[[NEG:.*]] = arith.negf %[[GE]] : f32
// CHECK-NEXT:    ascendc.tile_loop copy_in {
// CHECK:           ascendc.copy_in %{{.*}}, %[[T]][%{{.*}}], %{{.*}} pad : !ascendc.local<f32>, !ascendc.gm<f32>
// CHECK:         } compute {
// CHECK-NEXT:    ^bb0(%{{.*}}: index, %[[N:.*]]: index):
// CHECK-NEXT:      %[[TT:.*]] = ascendc.deque %[[QT]]
// CHECK-NEXT:      %[[O:.*]] = ascendc.alloc %[[QO]]
// CHECK-NEXT:      ascendc.muls %[[O]], %[[TT]], %[[NEG]], %[[N]] : !ascendc.local<f32>, f32
// CHECK-NEXT:      ascendc.enque %[[QO]], %[[O]]
// CHECK-NEXT:      ascendc.free %[[QT]], %[[TT]]
// CHECK-NEXT:    } copy_out {
// CHECK:           ascendc.copy_out %[[OUT]][%{{.*}}], %{{.*}}, %{{.*}} pad

// KlDivTargetBackward, f16, target broadcast on axis 0: BroadcastTo before the kernel, the
// kernel writes f32 terms, ReduceSum and Cast after it. The select with 0.0 on the true side
// uses the negated compare (NE) and the tensor-scalar Select.
// CHECK-LABEL: func.func @kltarget(
// CHECK:         %[[B:.*]] = ascendc.broadcast_to %{{.*}}(%{{.*}}, %{{.*}}) : tensor<1x?xf16> -> tensor<?x?xf16>
// CHECK-NEXT:    %[[Y:.*]] = ascendc.launch @kltarget_kernel(%{{.*}}, %{{.*}}, %[[B]]) sizes(%{{.*}}, %{{.*}}) maps {{.*}} -> tensor<?x?xf32>
// CHECK-NEXT:    %[[SUM:.*]] = ascendc.reduce_sum %[[Y]] map affine_map<(d0, d1) -> (0, d1)> : tensor<?x?xf32> -> tensor<1x?xf32>
// CHECK-NEXT:    %[[H:.*]] = ascendc.tensor_cast %[[SUM]] CAST_RINT : tensor<1x?xf32> -> tensor<1x?xf16>
// CHECK-NEXT:    func.return %[[H]] : tensor<1x?xf16>
// CHECK-LABEL: ascendc.kernel @kltarget_kernel
// CHECK:         } compute {
// CHECK:           ascendc.cast %{{.*}}, %{{.*}} CAST_NONE, %{{.*}} : !ascendc.local<f32>, !ascendc.local<f16>
// CHECK:           ascendc.cast %{{.*}}, %{{.*}} CAST_NONE, %{{.*}} : !ascendc.local<f32>, !ascendc.local<f16>
// CHECK:           ascendc.cast %[[T32:.*]], %{{.*}} CAST_NONE, %{{.*}} : !ascendc.local<f32>, !ascendc.local<f16>
// CHECK:           ascendc.ln %[[L:.*]], %[[T32]], %{{.*}} : !ascendc.local<f32>
// CHECK:           ascendc.adds %{{.*}}, %[[L]], %{{.*}}, %{{.*}} : !ascendc.local<f32>, f32
// CHECK:           ascendc.sub
// CHECK:           ascendc.mul
// CHECK:           %[[N64:.*]] = ascendc.align_up %{{.*}}, 64
// CHECK-NEXT:      ascendc.compares %[[M:.*]], %[[T32]], %{{.*}} NE, %[[N64]] : !ascendc.local<f32>, f32
// CHECK-NEXT:      ascendc.selects %{{.*}}, %[[M]], %{{.*}}, %{{.*}}, %[[N64]] : !ascendc.local<f32>, f32
// CHECK-NOT:       ascendc.cast
// CHECK:         } copy_out {

// SmoothL1LossBackward, beta = 3 (not a power of two: Div by a splat of beta, duplicated
// once in Init), the clamp as Compares + Select with splats of -1 and 1.
// CHECK-LABEL: ascendc.kernel @smoothl1_kernel
// CHECK:         %[[LEN:.*]] = ascendc.tile_length
// CHECK:         ascendc.duplicate %{{.*}}, %{{.*}}, %[[LEN]] : !ascendc.local<f32>, f32
// CHECK:         } compute {
// CHECK:           ascendc.cast %{{.*}}, %{{.*}} CAST_NONE, %{{.*}} : !ascendc.local<f32>, !ascendc.local<bf16>
// CHECK:           ascendc.sub
// CHECK:           ascendc.div
// CHECK:           ascendc.compares %{{.*}}, %{{.*}}, %{{.*}} LT
// CHECK:           ascendc.select
// CHECK:           ascendc.compares %{{.*}}, %{{.*}}, %{{.*}} GT
// CHECK:           ascendc.select
// CHECK:           ascendc.mul
// CHECK:         } copy_out {

// KlDivTargetBackward, log_target = 1, mean, a tensor grad_output: ge = g*s is read twice,
// so its Muls is applied once, first, and both products read ge as PyTorch's order has it
// (not g*(t - x) and g*exp(t) each scaled at the end).
// CHECK-LABEL: ascendc.kernel @kltarget_log_kernel
// CHECK:         } compute {
// CHECK:           ascendc.muls %[[GE:.*]], %{{.*}}, %{{.*}}, %{{.*}} : !ascendc.local<f32>, f32
// CHECK:           ascendc.exp %[[E:.*]], %{{.*}}, %{{.*}} : !ascendc.local<f32>
// CHECK:           ascendc.sub %[[D:.*]], %{{.*}}, %{{.*}}, %{{.*}} : !ascendc.local<f32>
// CHECK:           ascendc.mul %[[GD:.*]], %[[GE]], %[[D]], %{{.*}} : !ascendc.local<f32>
// CHECK:           ascendc.mul %[[FIRST:.*]], %[[GD]], %[[E]], %{{.*}} : !ascendc.local<f32>
// CHECK:           ascendc.mul %[[SECOND:.*]], %[[GE]], %[[E]], %{{.*}} : !ascendc.local<f32>
// CHECK:           ascendc.add %{{.*}}, %[[FIRST]], %[[SECOND]], %{{.*}} : !ascendc.local<f32>
// CHECK-NOT:       ascendc.muls
// CHECK:         } copy_out {

// After planning every temp has a buffer, and each kernel has a tile length.
// PLAN-LABEL: ascendc.kernel @kl_kernel attributes {arg_names = ["grad_output", "self", "target", "out", "scale"], num_inputs = 3 : i64, tile_length = 12288 : i64, ub_bytes = 196608 : i64, ub_capacity = 196608 : i64, soc = "ascend910b"}
// PLAN-LABEL: ascendc.kernel @kltarget_kernel
// PLAN-SAME:    tile_length = 5824 : i64, ub_bytes = 187104 : i64, ub_capacity = 196608 : i64, ub_reserved = 8192 : i64
// PLAN-NOT:     ascendc.temp
// PLAN:         ascendc.tbuf : !ascendc.tbuf<i1>
// PLAN-LABEL: ascendc.kernel @smoothl1_kernel
// PLAN-NOT:     ascendc.temp
// PLAN:       } copy_out
