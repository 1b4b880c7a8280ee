// lower-lossgrad for the loss family (docs/operators.md, "The formulas"): each body in the
// order of PyTorch 2.13's decomposition, where the scale enters (2*(1/n) for MSE, 1/n inside
// Huber's branches, /n at the end of the binary cross entropies; SoftMargin in its eager
// kernel's order, -(1/n) before the division by 1 + e, one exp of -|t*x| by two selects), BCE's clamp
// at float32(1e-12) kept NaN-propagating by olt + select, the optional inputs as extra
// operands of the generic (weight, pos_weight) and named on the function (lossgrad.inputs).
// RUN: lossgrad-opt %s --split-input-file -p lower-lossgrad | filecheck %s

func.func @mse_mean(%dy: tensor<f32>, %x: tensor<2x3xf32>, %t: tensor<3xf32>) -> tensor<2x3xf32> {
  %g = lossgrad.mse_loss_backward %dy, %x, %t : tensor<f32>, tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  func.return %g : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @mse_mean(
// CHECK-SAME:    attributes {lossgrad.op_type = "MseLossBackward", lossgrad.attributes = {reduction = "mean"}, lossgrad.divisor = "numel(broadcast(self, target))"}
// CHECK-NEXT:    %scale = arith.constant 0.166666672 : f32
// CHECK-NEXT:    %init = tensor.empty() : tensor<2x3xf32>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%dy, %x, %t : tensor<f32>, tensor<2x3xf32>, tensor<3xf32>) outs(%init : tensor<2x3xf32>)
// CHECK-NEXT:    ^bb0(%[[V0:[0-9]+]]: f32, %[[V1:[0-9]+]]: f32, %[[V2:[0-9]+]]: f32, %[[V3:[0-9]+]]: f32):
// CHECK-NEXT:    %[[V4:[0-9]+]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:    %[[V5:[0-9]+]] = arith.mulf %scale, %[[V4]] : f32
// CHECK-NEXT:    %[[V6:[0-9]+]] = arith.subf %[[V1]], %[[V2]] : f32
// CHECK-NEXT:    %[[V7:[0-9]+]] = arith.mulf %[[V6]], %[[V5]] : f32
// CHECK-NEXT:    %[[V8:[0-9]+]] = arith.mulf %[[V7]], %[[V0]] : f32
// CHECK-NEXT:    linalg.yield %[[V8]] : f32

// -----


func.func @huber_sum(%dy: tensor<2x3xf32>, %x: tensor<2x3xf32>, %t: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %g = lossgrad.huber_loss_backward %dy, %x, %t reduction = sum delta = 5.000000e-01 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  func.return %g : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @huber_sum(
// CHECK-SAME:    attributes {lossgrad.op_type = "HuberLossBackward", lossgrad.attributes = {reduction = "sum", delta = 5.000000e-01 : f64}}
// CHECK-NEXT:    %init = tensor.empty() : tensor<2x3xf32>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%dy, %x, %t : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) outs(%init : tensor<2x3xf32>)
// CHECK-NEXT:    ^bb0(%[[V0:[0-9]+]]: f32, %[[V1:[0-9]+]]: f32, %[[V2:[0-9]+]]: f32, %[[V3:[0-9]+]]: f32):
// CHECK-NEXT:    %[[V4:[0-9]+]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:    %[[V5:[0-9]+]] = arith.subf %[[V1]], %[[V2]] : f32
// CHECK-NEXT:    %[[V6:[0-9]+]] = arith.negf %[[V0]] : f32
// CHECK-NEXT:    %[[V7:[0-9]+]] = arith.mulf %[[V6]], %[[V4]] : f32
// CHECK-NEXT:    %[[V8:[0-9]+]] = arith.mulf %[[V0]], %[[V4]] : f32
// CHECK-NEXT:    %[[V9:[0-9]+]] = arith.mulf %[[V5]], %[[V0]] : f32
// CHECK-NEXT:    %[[V10:[0-9]+]] = arith.cmpf ogt, %[[V5]], %[[V4]] : f32
// CHECK-NEXT:    %[[V11:[0-9]+]] = arith.select %[[V10]], %[[V8]], %[[V9]] : f32
// CHECK-NEXT:    %[[V12:[0-9]+]] = arith.negf %[[V4]] : f32
// CHECK-NEXT:    %[[V13:[0-9]+]] = arith.cmpf olt, %[[V5]], %[[V12]] : f32
// CHECK-NEXT:    %[[V14:[0-9]+]] = arith.select %[[V13]], %[[V7]], %[[V11]] : f32
// CHECK-NEXT:    linalg.yield %[[V14]] : f32

// -----


func.func @soft_margin_mean(%dy: tensor<f32>, %x: tensor<4xf32>, %t: tensor<4xf32>) -> tensor<4xf32> {
  %g = lossgrad.soft_margin_loss_backward %dy, %x, %t reduction = mean : tensor<f32>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  func.return %g : tensor<4xf32>
}
// CHECK-LABEL: func.func @soft_margin_mean(
// CHECK-SAME:    attributes {lossgrad.op_type = "SoftMarginLossBackward", lossgrad.attributes = {reduction = "mean"}, lossgrad.divisor = "numel(broadcast(self, target))"}
// CHECK-NEXT:    %scale = arith.constant 2.500000e-01 : f32
// CHECK-NEXT:    %init = tensor.empty() : tensor<4xf32>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0) -> ()>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%dy, %x, %t : tensor<f32>, tensor<4xf32>, tensor<4xf32>) outs(%init : tensor<4xf32>)
// CHECK-NEXT:    ^bb0(%[[V0:[0-9]+]]: f32, %[[V1:[0-9]+]]: f32, %[[V2:[0-9]+]]: f32, %[[V3:[0-9]+]]: f32):
// CHECK-NEXT:    %[[V4:[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[V5:[0-9]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    %[[V6:[0-9]+]] = arith.mulf %[[V2]], %[[V1]] : f32
// CHECK-NEXT:    %[[V7:[0-9]+]] = arith.cmpf olt, %[[V6]], %[[V4]] : f32
// CHECK-NEXT:    %[[V8:[0-9]+]] = arith.negf %[[V6]] : f32
// CHECK-NEXT:    %[[V9:[0-9]+]] = arith.select %[[V7]], %[[V6]], %[[V8]] : f32
// CHECK-NEXT:    %[[V10:[0-9]+]] = math.exp %[[V9]] : f32
// CHECK-NEXT:    %[[V11:[0-9]+]] = arith.select %[[V7]], %[[V5]], %[[V10]] : f32
// CHECK-NEXT:    %[[V12:[0-9]+]] = arith.mulf %[[V2]], %[[V11]] : f32
// CHECK-NEXT:    %[[V13:[0-9]+]] = arith.negf %scale : f32
// CHECK-NEXT:    %[[V14:[0-9]+]] = arith.mulf %[[V12]], %[[V13]] : f32
// CHECK-NEXT:    %[[V15:[0-9]+]] = arith.addf %[[V5]], %[[V10]] : f32
// CHECK-NEXT:    %[[V16:[0-9]+]] = arith.divf %[[V14]], %[[V15]] : f32
// CHECK-NEXT:    %[[V17:[0-9]+]] = arith.mulf %[[V16]], %[[V0]] : f32
// CHECK-NEXT:    linalg.yield %[[V17]] : f32

// -----


func.func @bce_weight(%dy: tensor<f32>, %x: tensor<2x3xf32>, %t: tensor<2x3xf32>, %w: tensor<3xf32>) -> tensor<2x3xf32> {
  %g = lossgrad.binary_cross_entropy_backward %dy, %x, %t weight %w reduction = mean : tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  func.return %g : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @bce_weight(
// CHECK-SAME:    attributes {lossgrad.op_type = "BinaryCrossEntropyBackward", lossgrad.attributes = {reduction = "mean"}, lossgrad.inputs = ["grad_output", "self", "target", "weight"], lossgrad.divisor = "numel(broadcast(self, target))"}
// CHECK-NEXT:    %scale = arith.constant 6.000000e+00 : f32
// CHECK-NEXT:    %init = tensor.empty() : tensor<2x3xf32>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%dy, %x, %t, %w : tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32>) outs(%init : tensor<2x3xf32>)
// CHECK-NEXT:    ^bb0(%[[V0:[0-9]+]]: f32, %[[V1:[0-9]+]]: f32, %[[V2:[0-9]+]]: f32, %[[V3:[0-9]+]]: f32, %[[V4:[0-9]+]]: f32):
// CHECK-NEXT:    %[[V5:[0-9]+]] = arith.subf %[[V1]], %[[V2]] : f32
// CHECK-NEXT:    %[[V6:[0-9]+]] = arith.mulf %[[V0]], %[[V5]] : f32
// CHECK-NEXT:    %[[V7:[0-9]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    %[[V8:[0-9]+]] = arith.subf %[[V7]], %[[V1]] : f32
// CHECK-NEXT:    %[[V9:[0-9]+]] = arith.mulf %[[V1]], %[[V8]] : f32
// CHECK-NEXT:    %[[V10:[0-9]+]] = arith.constant 1.000000e-12 : f32
// CHECK-NEXT:    %[[V11:[0-9]+]] = arith.cmpf olt, %[[V9]], %[[V10]] : f32
// CHECK-NEXT:    %[[V12:[0-9]+]] = arith.select %[[V11]], %[[V10]], %[[V9]] : f32
// CHECK-NEXT:    %[[V13:[0-9]+]] = arith.divf %[[V6]], %[[V12]] : f32
// CHECK-NEXT:    %[[V14:[0-9]+]] = arith.mulf %[[V13]], %[[V3]] : f32
// CHECK-NEXT:    %[[V15:[0-9]+]] = arith.divf %[[V14]], %scale : f32
// CHECK-NEXT:    linalg.yield %[[V15]] : f32

// -----


func.func @bce_logits_pos_weight(%dy: tensor<2x3xf16>, %x: tensor<2x3xf16>, %t: tensor<2x3xf16>, %p: tensor<3xf16>) -> tensor<2x3xf16> {
  %g = lossgrad.binary_cross_entropy_with_logits_backward %dy, %x, %t pos_weight %p reduction = none : tensor<2x3xf16>, tensor<2x3xf16>, tensor<2x3xf16>, tensor<3xf16> -> tensor<2x3xf16>
  func.return %g : tensor<2x3xf16>
}
// CHECK-LABEL: func.func @bce_logits_pos_weight(
// CHECK-SAME:    attributes {lossgrad.op_type = "BinaryCrossEntropyWithLogitsBackward", lossgrad.attributes = {reduction = "none"}, lossgrad.inputs = ["grad_output", "self", "target", "pos_weight"]}
// CHECK-NEXT:    %init = tensor.empty() : tensor<2x3xf16>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%dy, %x, %t, %p : tensor<2x3xf16>, tensor<2x3xf16>, tensor<2x3xf16>, tensor<3xf16>) outs(%init : tensor<2x3xf16>)
// CHECK-NEXT:    ^bb0(%[[V0:[0-9]+]]: f16, %[[V1:[0-9]+]]: f16, %[[V2:[0-9]+]]: f16, %[[V3:[0-9]+]]: f16, %[[V4:[0-9]+]]: f16):
// CHECK-NEXT:    %[[V5:[0-9]+]] = arith.extf %[[V0]] : f16 to f32
// CHECK-NEXT:    %[[V6:[0-9]+]] = arith.extf %[[V1]] : f16 to f32
// CHECK-NEXT:    %[[V7:[0-9]+]] = arith.extf %[[V2]] : f16 to f32
// CHECK-NEXT:    %[[V8:[0-9]+]] = arith.extf %[[V3]] : f16 to f32
// CHECK-NEXT:    %[[V9:[0-9]+]] = arith.mulf %[[V8]], %[[V7]] : f32
// CHECK-NEXT:    %[[V10:[0-9]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    %[[V11:[0-9]+]] = arith.addf %[[V9]], %[[V10]] : f32
// CHECK-NEXT:    %[[V12:[0-9]+]] = arith.subf %[[V11]], %[[V7]] : f32
// CHECK-NEXT:    %[[V13:[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[V14:[0-9]+]] = arith.cmpf ogt, %[[V6]], %[[V13]] : f32
// CHECK-NEXT:    %[[V15:[0-9]+]] = arith.negf %[[V6]] : f32
// CHECK-NEXT:    %[[V16:[0-9]+]] = arith.select %[[V14]], %[[V15]], %[[V6]] : f32
// CHECK-NEXT:    %[[V17:[0-9]+]] = math.exp %[[V16]] : f32
// CHECK-NEXT:    %[[V18:[0-9]+]] = arith.select %[[V14]], %[[V10]], %[[V17]] : f32
// CHECK-NEXT:    %[[V19:[0-9]+]] = arith.addf %[[V10]], %[[V17]] : f32
// CHECK-NEXT:    %[[V20:[0-9]+]] = arith.divf %[[V18]], %[[V19]] : f32
// CHECK-NEXT:    %[[V21:[0-9]+]] = arith.mulf %[[V12]], %[[V20]] : f32
// CHECK-NEXT:    %[[V22:[0-9]+]] = arith.subf %[[V21]], %[[V9]] : f32
// CHECK-NEXT:    %[[V23:[0-9]+]] = arith.mulf %[[V22]], %[[V5]] : f32
// CHECK-NEXT:    %[[V24:[0-9]+]] = arith.truncf %[[V23]] : f32 to f16
// CHECK-NEXT:    linalg.yield %[[V24]] : f16
