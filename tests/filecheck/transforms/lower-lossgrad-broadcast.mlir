// lower-lossgrad: broadcasting in the indexing maps (constant 0 at a broadcast 1, leading
// axes dropped), and KL results smaller than B summed by reduction loops into a zero-filled
// accumulator.
// RUN: lossgrad-opt %s --split-input-file -p lower-lossgrad | filecheck %s

// CHECK-NOT: lossgrad.

func.func @kl_target_row(%dy: tensor<f32>, %x: tensor<4x3xf32>, %t: tensor<3xf32>) -> tensor<4x3xf32> {
  %g = lossgrad.kl_div_backward %dy, %x, %t reduction = sum : tensor<f32>, tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
  func.return %g : tensor<4x3xf32>
}
// A broadcast target, a scalar grad_output; the result is self-shaped = B: nothing summed.
// CHECK-LABEL: func.func @kl_target_row(
// CHECK-NEXT:    %[[INIT:.*]] = tensor.empty() : tensor<4x3xf32>
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<f32>, tensor<4x3xf32>, tensor<3xf32>) outs(%[[INIT]] : tensor<4x3xf32>)

// -----

func.func @kl_self_row(%dy: tensor<1x3xf32>, %x: tensor<1x3xf32>, %t: tensor<4x3xf32>) -> tensor<1x3xf32> {
  %g = lossgrad.kl_div_backward %dy, %x, %t reduction = batchmean : tensor<1x3xf32>, tensor<1x3xf32>, tensor<4x3xf32> -> tensor<1x3xf32>
  func.return %g : tensor<1x3xf32>
}
// A broadcast self: the gradient is summed over d0 into a C accumulator.
// CHECK-LABEL: func.func @kl_self_row(
// CHECK-NEXT:    %[[S:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    %[[INIT:.*]] = tensor.empty() : tensor<1x3xf32>
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[ZEROS:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[INIT]] : tensor<1x3xf32>) -> tensor<1x3xf32>
// CHECK-NEXT:    %[[G:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (0, d1)>, affine_map<(d0, d1) -> (0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (0, d1)>], iterator_types = ["reduction", "parallel"]} ins({{.*}}) outs(%[[ZEROS]] : tensor<1x3xf32>) {
// CHECK-NEXT:    ^bb0(%[[A:.*]]: f32, %{{.*}}: f32, %[[C:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[GE:.*]] = arith.mulf %[[A]], %[[S]] : f32
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %[[GE]], %[[C]] : f32
// CHECK-NEXT:      %[[N:.*]] = arith.negf %[[M]] : f32
// CHECK-NEXT:      %[[SUM:.*]] = arith.addf %[[ACC]], %[[N]] : f32
// CHECK-NEXT:      linalg.yield %[[SUM]] : f32
// CHECK-NEXT:    } -> tensor<1x3xf32>
// CHECK-NEXT:    func.return %[[G]] : tensor<1x3xf32>

// -----

func.func @klt_leading(%dy: tensor<f64>, %x: tensor<2x4x3xf64>, %t: tensor<3xf64>) -> tensor<3xf64> {
  %g = lossgrad.kl_div_target_backward %dy, %x, %t reduction = sum log_target = true : tensor<f64>, tensor<2x4x3xf64>, tensor<3xf64> -> tensor<3xf64>
  func.return %g : tensor<3xf64>
}
// A target of lower rank: the missing leading axes are summed.
// CHECK-LABEL: func.func @klt_leading(
// CHECK:         linalg.fill ins(%{{.*}} : f64) outs(%{{.*}} : tensor<3xf64>) -> tensor<3xf64>
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> ()>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d2)>, affine_map<(d0, d1, d2) -> (d2)>], iterator_types = ["reduction", "reduction", "parallel"]}
// CHECK-NEXT:    ^bb0(%{{.*}}: f64, %{{.*}}: f64, %{{.*}}: f64, %[[ACC:.*]]: f64):
// CHECK:           %[[SUM:.*]] = arith.addf %[[ACC]], %{{.*}} : f64
// CHECK-NEXT:      linalg.yield %[[SUM]] : f64

// -----

func.func @klt_both(%dy: tensor<f32>, %x: tensor<2x1x4xf32>, %t: tensor<3x1xf32>) -> tensor<3x1xf32> {
  %g = lossgrad.kl_div_target_backward %dy, %x, %t reduction = none : tensor<f32>, tensor<2x1x4xf32>, tensor<3x1xf32> -> tensor<3x1xf32>
  func.return %g : tensor<3x1xf32>
}
// self [2,1,4] and target [3,1] both broadcast to B = [2,3,4]; the target's gradient sums d0 and d2.
// CHECK-LABEL: func.func @klt_both(
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> ()>, affine_map<(d0, d1, d2) -> (d0, 0, d2)>, affine_map<(d0, d1, d2) -> (d1, 0)>, affine_map<(d0, d1, d2) -> (d1, 0)>], iterator_types = ["reduction", "parallel", "reduction"]}

// -----

func.func @sl1_enlarging(%dy: tensor<4x1xf32>, %x: tensor<3xf32>, %t: tensor<3xf32>) -> tensor<4x3xf32> {
  %g = lossgrad.smooth_l1_loss_backward %dy, %x, %t reduction = mean : tensor<4x1xf32>, tensor<3xf32>, tensor<3xf32> -> tensor<4x3xf32>
  func.return %g : tensor<4x3xf32>
}
// grad_output enlarges the iteration space to [4,3]; mean still divides by numel(B) = 3.
// CHECK-LABEL: func.func @sl1_enlarging(
// CHECK-NEXT:    %[[S:.*]] = arith.constant 0.333333343 : f32
// CHECK-NEXT:    %[[INIT:.*]] = tensor.empty() : tensor<4x3xf32>
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}

// -----

func.func @sl1_rank0(%dy: tensor<f32>, %x: tensor<f32>, %t: tensor<f32>) -> tensor<f32> {
  %g = lossgrad.smooth_l1_loss_backward %dy, %x, %t reduction = sum : tensor<f32>, tensor<f32>, tensor<f32> -> tensor<f32>
  func.return %g : tensor<f32>
}
// CHECK-LABEL: func.func @sl1_rank0(
// CHECK-NEXT:    tensor.empty() : tensor<f32>
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>, affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}

// -----

func.func @kl_batchmean_rank0_self(%dy: tensor<f32>, %x: tensor<f32>, %t: tensor<3xf32>) -> tensor<f32> {
  %g = lossgrad.kl_div_backward %dy, %x, %t reduction = batchmean : tensor<f32>, tensor<f32>, tensor<3xf32> -> tensor<f32>
  func.return %g : tensor<f32>
}
// batchmean of a 0-d self has no scale; the 0-d result sums all of B.
// CHECK-LABEL: func.func @kl_batchmean_rank0_self(
// CHECK-NEXT:    tensor.empty() : tensor<f32>
// CHECK-NEXT:    arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    linalg.fill
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0) -> ()>, affine_map<(d0) -> ()>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
// CHECK-NEXT:    ^bb0(%[[A:.*]]: f32, %{{.*}}: f32, %[[C:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %[[A]], %[[C]] : f32
