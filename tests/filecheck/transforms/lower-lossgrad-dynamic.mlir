// lower-lossgrad on signatures with dynamic dims: the reduction scale computed from tensor.dim
// (index -> i64 -> C, then 1/n), and output sizes read from an operand that is not broadcast.
// RUN: lossgrad-opt %s --split-input-file -p lower-lossgrad | filecheck %s

// CHECK-NOT: lossgrad.

func.func @klt_mean(%dy: tensor<f32>, %x: tensor<?x?xf32>, %t: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %g = lossgrad.kl_div_target_backward %dy, %x, %t reduction = mean : tensor<f32>, tensor<?x?xf32>, tensor<?x?xf32> -> tensor<?x?xf32>
  func.return %g : tensor<?x?xf32>
}
// CHECK-LABEL: func.func @klt_mean(
// CHECK-SAME:      %[[DY:.*]]: tensor<f32>, %[[X:.*]]: tensor<?x?xf32>, %[[T:.*]]: tensor<?x?xf32>)
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[D0:.*]] = tensor.dim %[[X]], %[[C0]] : tensor<?x?xf32>
// CHECK-NEXT:    %[[C1:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %[[D1:.*]] = tensor.dim %[[X]], %[[C1]] : tensor<?x?xf32>
// CHECK-NEXT:    %[[NUMEL:.*]] = arith.muli %[[D0]], %[[D1]] : index
// CHECK-NEXT:    %[[NI:.*]] = arith.index_cast %[[NUMEL]] : index to i64
// CHECK-NEXT:    %[[NF:.*]] = arith.uitofp %[[NI]] : i64 to f32
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    %[[S:.*]] = arith.divf %[[ONE]], %[[NF]] : f32
// CHECK-NEXT:    %[[T0:.*]] = tensor.dim %[[T]], %[[C0]] : tensor<?x?xf32>
// CHECK-NEXT:    %[[T1:.*]] = tensor.dim %[[T]], %[[C1]] : tensor<?x?xf32>
// CHECK-NEXT:    %[[INIT:.*]] = tensor.empty(%[[T0]], %[[T1]]) : tensor<?x?xf32>
// CHECK-NEXT:    linalg.generic {{.*}} ins(%[[DY]], %[[X]], %[[T]] : tensor<f32>, tensor<?x?xf32>, tensor<?x?xf32>) outs(%[[INIT]] : tensor<?x?xf32>) {
// CHECK-NEXT:    ^bb0(%[[A:.*]]: f32, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32):
// CHECK-NEXT:      arith.mulf %[[A]], %[[S]] : f32

// -----

func.func @kl_batchmean(%dy: tensor<f64>, %x: tensor<?x?xf64>, %t: tensor<?x?xf64>) -> tensor<?x?xf64> {
  %g = lossgrad.kl_div_backward %dy, %x, %t reduction = batchmean : tensor<f64>, tensor<?x?xf64>, tensor<?x?xf64> -> tensor<?x?xf64>
  func.return %g : tensor<?x?xf64>
}
// batchmean: n is self's dim 0, no product.
// CHECK-LABEL: func.func @kl_batchmean(
// CHECK-SAME:      %[[DY:.*]]: tensor<f64>, %[[X:.*]]: tensor<?x?xf64>, %[[T:.*]]: tensor<?x?xf64>)
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[D0:.*]] = tensor.dim %[[X]], %[[C0]] : tensor<?x?xf64>
// CHECK-NEXT:    %[[NI:.*]] = arith.index_cast %[[D0]] : index to i64
// CHECK-NEXT:    %[[NF:.*]] = arith.uitofp %[[NI]] : i64 to f64
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant 1.000000e+00 : f64
// CHECK-NEXT:    %[[S:.*]] = arith.divf %[[ONE]], %[[NF]] : f64
// CHECK-NEXT:    %[[C1:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %[[D1:.*]] = tensor.dim %[[X]], %[[C1]] : tensor<?x?xf64>
// CHECK-NEXT:    tensor.empty(%[[D0]], %[[D1]]) : tensor<?x?xf64>

// -----

func.func @sl1_outer(%dy: tensor<f32>, %x: tensor<?x1xf32>, %t: tensor<1x?xf32>) -> tensor<?x?xf32> {
  %g = lossgrad.smooth_l1_loss_backward %dy, %x, %t reduction = mean beta = 2.500000e+00 : tensor<f32>, tensor<?x1xf32>, tensor<1x?xf32> -> tensor<?x?xf32>
  func.return %g : tensor<?x?xf32>
}
// An outer-product broadcast: each dynamic size comes from the operand that is not a 1 there.
// CHECK-LABEL: func.func @sl1_outer(
// CHECK-SAME:      %[[DY:.*]]: tensor<f32>, %[[X:.*]]: tensor<?x1xf32>, %[[T:.*]]: tensor<1x?xf32>)
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[D0:.*]] = tensor.dim %[[X]], %[[C0]] : tensor<?x1xf32>
// CHECK-NEXT:    %[[C1:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %[[D1:.*]] = tensor.dim %[[T]], %[[C1]] : tensor<1x?xf32>
// CHECK-NEXT:    arith.muli %[[D0]], %[[D1]] : index
// CHECK:         %[[INIT:.*]] = tensor.empty(%[[D0]], %[[D1]]) : tensor<?x?xf32>
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}

// -----

func.func @kl_partly_static(%dy: tensor<f32>, %x: tensor<?x5xf32>, %t: tensor<1x5xf32>) -> tensor<?x5xf32> {
  %g = lossgrad.kl_div_backward %dy, %x, %t reduction = mean : tensor<f32>, tensor<?x5xf32>, tensor<1x5xf32> -> tensor<?x5xf32>
  func.return %g : tensor<?x5xf32>
}
// numel = dim 0 times the static 5.
// CHECK-LABEL: func.func @kl_partly_static(
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[D0:.*]] = tensor.dim %{{.*}}, %[[C0]] : tensor<?x5xf32>
// CHECK-NEXT:    %[[C5:.*]] = arith.constant 5 : index
// CHECK-NEXT:    arith.muli %[[D0]], %[[C5]] : index
// CHECK:         tensor.empty(%[[D0]]) : tensor<?x5xf32>

// -----

func.func @kl_sum_to_self(%dy: tensor<f32>, %x: tensor<1x?xf32>, %t: tensor<?x?xf32>) -> tensor<1x?xf32> {
  %g = lossgrad.kl_div_backward %dy, %x, %t reduction = sum : tensor<f32>, tensor<1x?xf32>, tensor<?x?xf32> -> tensor<1x?xf32>
  func.return %g : tensor<1x?xf32>
}
// A dynamic accumulator: sized from self itself, summed over d0.
// CHECK-LABEL: func.func @kl_sum_to_self(
// CHECK-SAME:      %{{.*}}: tensor<f32>, %[[X:.*]]: tensor<1x?xf32>, %{{.*}}: tensor<?x?xf32>)
// CHECK-NEXT:    %[[C1:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %[[D1:.*]] = tensor.dim %[[X]], %[[C1]] : tensor<1x?xf32>
// CHECK-NEXT:    %[[INIT:.*]] = tensor.empty(%[[D1]]) : tensor<1x?xf32>
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[ZEROS:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[INIT]] : tensor<1x?xf32>) -> tensor<1x?xf32>
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (0, d1)>], iterator_types = ["reduction", "parallel"]} {{.*}} outs(%[[ZEROS]] : tensor<1x?xf32>)
