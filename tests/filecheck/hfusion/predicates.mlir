// hfusion.compare computes oeq, une, ole, olt, oge and ogt on floats. An unordered
// predicate (canonicalization may make one) is the ordered negation with the select's
// operands swapped; a scalar on the left is moved right with the predicate swapped.
// RUN: lossgrad-opt %s -p convert-linalg-to-hfusion | filecheck %s

func.func @unordered(%g: tensor<f32>, %x: tensor<4xf32>, %t: tensor<4xf32>) -> tensor<4xf32> attributes {lossgrad.op_type = "SmoothL1LossBackward", lossgrad.attributes = {reduction = "none", beta = 0.000000e+00 : f64}} {
  %init = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> ()>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%g, %x, %t : tensor<f32>, tensor<4xf32>, tensor<4xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%0: f32, %1: f32, %2: f32, %3: f32):
    %one = arith.constant 1.000000e+00 : f32
    %zero = arith.constant 0.000000e+00 : f32
    %d = arith.subf %1, %2 : f32
    %c = arith.cmpf ule, %d, %zero : f32
    %s = arith.select %c, %zero, %d : f32
    %c2 = arith.cmpf olt, %zero, %s : f32
    %s2 = arith.select %c2, %one, %s : f32
    %v = arith.mulf %0, %s2 : f32
    linalg.yield %v : f32
  } -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}
// CHECK-LABEL: func.func @unordered(
// CHECK:         %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[D:.*]] = linalg.elemwise_binary {fun = #linalg.binary_fn<sub>}
// ule(d, 0) is not ogt(d, 0): select(ogt, d, 0).
// CHECK-NEXT:    %[[EB:.*]] = tensor.empty() : tensor<4xi1>
// CHECK-NEXT:    %[[C:.*]] = hfusion.compare {compare_fn = #hfusion.compare_fn<vgt>} ins(%[[D]], %[[ZERO]] : tensor<4xf32>, f32) outs(%[[EB]] : tensor<4xi1>) -> tensor<4xi1>
// CHECK-NEXT:    %[[S:.*]] = hfusion.select ins(%[[C]], %[[D]], %[[ZERO]] : tensor<4xi1>, tensor<4xf32>, f32)
// olt(0, s) is ogt(s, 0).
// CHECK-NEXT:    %[[C2:.*]] = hfusion.compare {compare_fn = #hfusion.compare_fn<vgt>} ins(%[[S]], %[[ZERO]] : tensor<4xf32>, f32)
// CHECK-NEXT:    %[[S2:.*]] = hfusion.select ins(%[[C2]], %[[ONE]], %[[S]] : tensor<4xi1>, f32, tensor<4xf32>)
// CHECK-NEXT:    %[[R:.*]] = linalg.elemwise_binary {fun = #linalg.binary_fn<mul>} ins(%{{.*}}, %[[S2]] : f32, tensor<4xf32>)
// CHECK-NEXT:    func.return %[[R]] : tensor<4xf32>
