// Every invalid case of docs/operators.md that IR can express: the verifier reports spec.validate's
// message, with the aclnn code, for each.
// RUN: lossgrad-opt %s --split-input-file --verify-diagnostics | filecheck %s

%dy, %x, %t = "test.op"() : () -> (tensor<f32>, tensor<4xi32>, tensor<4xf32>)
%g = lossgrad.kl_div_backward %dy, %x, %t : tensor<f32>, tensor<4xi32>, tensor<4xf32> -> tensor<4xi32>
// CHECK: KlDivBackward: self: element type must be one of float16, bfloat16, float32, float64, got i32 [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t = "test.op"() : () -> (tensor<f80>, tensor<4xf32>, tensor<4xf32>)
%g = lossgrad.smooth_l1_loss_backward %dy, %x, %t : tensor<f80>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
// CHECK: SmoothL1LossBackward: grad_output: element type must be one of float16, bfloat16, float32, float64, got f80 [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t = "test.op"() : () -> (tensor<f32>, tensor<4xf32>, tensor<4xi1>)
%g = lossgrad.kl_div_target_backward %dy, %x, %t : tensor<f32>, tensor<4xf32>, tensor<4xi1> -> tensor<4xi1>
// CHECK: KlDivTargetBackward: target: element type must be one of float16, bfloat16, float32, float64, got i1 [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t = "test.op"() : () -> (tensor<f32>, tensor<1x1x1x1x1x1x1x1x2xf32>, tensor<2xf32>)
%g = lossgrad.kl_div_backward %dy, %x, %t : tensor<f32>, tensor<1x1x1x1x1x1x1x1x2xf32>, tensor<2xf32> -> tensor<1x1x1x1x1x1x1x1x2xf32>
// CHECK: KlDivBackward: self: rank must be at most 8, got 9 [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t = "test.op"() : () -> (tensor<1x1x1x1x1x1x1x1x1xf64>, tensor<2xf64>, tensor<2xf64>)
%g = lossgrad.smooth_l1_loss_backward %dy, %x, %t : tensor<1x1x1x1x1x1x1x1x1xf64>, tensor<2xf64>, tensor<2xf64> -> tensor<1x1x1x1x1x1x1x1x2xf64>
// CHECK: SmoothL1LossBackward: grad_output: rank must be at most 8, got 9 [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t = "test.op"() : () -> (tensor<f32>, tensor<4x3xf32>, tensor<4xf32>)
%g = lossgrad.kl_div_backward %dy, %x, %t : tensor<f32>, tensor<4x3xf32>, tensor<4xf32> -> tensor<4x3xf32>
// CHECK: KlDivBackward: self and target: shapes self [4, 3], target [4] do not broadcast (axis -1: 3 vs 4) [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t = "test.op"() : () -> (tensor<5xf32>, tensor<4x3xf32>, tensor<3xf32>)
%g = lossgrad.smooth_l1_loss_backward %dy, %x, %t : tensor<5xf32>, tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
// CHECK: SmoothL1LossBackward: grad_output and broadcast(self, target): {{.*}} do not broadcast (axis -1: 5 vs 3) [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t = "test.op"() : () -> (tensor<2x4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>)
%g = lossgrad.kl_div_backward %dy, %x, %t : tensor<2x4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
// CHECK: KlDivBackward: grad_output: shape [2, 4, 3] must broadcast to broadcast(self, target) [4, 3] without enlarging it (rank 3 > 2) [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t = "test.op"() : () -> (tensor<4x3xf32>, tensor<4x1xf32>, tensor<1x1xf32>)
%g = lossgrad.kl_div_target_backward %dy, %x, %t : tensor<4x3xf32>, tensor<4x1xf32>, tensor<1x1xf32> -> tensor<1x1xf32>
// CHECK: KlDivTargetBackward: grad_output: shape [4, 3] must broadcast to broadcast(self, target) [4, 1] without enlarging it (axis -1: 3 vs 1) [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t = "test.op"() : () -> (tensor<f32>, tensor<4xf32>, tensor<4xf32>)
%g = lossgrad.smooth_l1_loss_backward %dy, %x, %t reduction = batchmean : tensor<f32>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
// CHECK: SmoothL1LossBackward: attribute 'reduction': must be one of 'none', 'mean', 'sum', got 'batchmean' [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t = "test.op"() : () -> (tensor<f32>, tensor<4xf32>, tensor<4xf32>)
%g = lossgrad.smooth_l1_loss_backward %dy, %x, %t beta = -5.000000e-01 : tensor<f32>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
// CHECK: SmoothL1LossBackward: attribute 'beta': must be a float >= 0 (not NaN), got -0.5 [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t = "test.op"() : () -> (tensor<f32>, tensor<4xf32>, tensor<4xf32>)
%g = lossgrad.smooth_l1_loss_backward %dy, %x, %t beta = 0x7FF8000000000000 : tensor<f32>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
// CHECK: SmoothL1LossBackward: attribute 'beta': must be a float >= 0 (not NaN), got nan [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t = "test.op"() : () -> (tensor<f32>, tensor<4xf32>, tensor<4xf16>)
%g = lossgrad.kl_div_backward %dy, %x, %t : tensor<f32>, tensor<4xf32>, tensor<4xf16> -> tensor<4xf16>
// CHECK: KlDivBackward: result: type must be tensor<4xf32> (derived from the operands), got tensor<4xf16> [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t = "test.op"() : () -> (tensor<f32>, tensor<4x1xf32>, tensor<3xf32>)
%g = lossgrad.kl_div_target_backward %dy, %x, %t : tensor<f32>, tensor<4x1xf32>, tensor<3xf32> -> tensor<4x3xf32>
// CHECK: KlDivTargetBackward: result: type must be tensor<3xf32> (derived from the operands), got tensor<4x3xf32> [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t = "test.op"() : () -> (tensor<f16>, tensor<?xf16>, tensor<4xbf16>)
%g = lossgrad.smooth_l1_loss_backward %dy, %x, %t : tensor<f16>, tensor<?xf16>, tensor<4xbf16> -> tensor<?xf32>
// CHECK: SmoothL1LossBackward: result: type must be tensor<4xf32> (derived from the operands), got tensor<?xf32> [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

// An unranked tensor is not a spec input at all: the generic operand constraint rejects it.
%dy, %x, %t = "test.op"() : () -> (tensor<f32>, tensor<*xf32>, tensor<4xf32>)
%g = lossgrad.kl_div_backward %dy, %x, %t : tensor<f32>, tensor<*xf32>, tensor<4xf32> -> tensor<4xf32>
// CHECK:      operand 'self_' at position 1 does not verify:
// CHECK-NEXT: tensor<*xf32> should be of base attribute tensor

// -----

%dy, %x, %t = "test.op"() : () -> (tensor<f32>, tensor<4xf32>, tensor<4xf32>)
%g = lossgrad.huber_loss_backward %dy, %x, %t delta = 0.000000e+00 : tensor<f32>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
// CHECK: HuberLossBackward: attribute 'delta': must be a float > 0 (not NaN), got 0.0 [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t = "test.op"() : () -> (tensor<f32>, tensor<4xf32>, tensor<4xf32>)
%g = lossgrad.mse_loss_backward %dy, %x, %t reduction = batchmean : tensor<f32>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
// CHECK: MseLossBackward: attribute 'reduction': must be one of 'none', 'mean', 'sum', got 'batchmean' [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t = "test.op"() : () -> (tensor<f32>, tensor<3xf32>, tensor<2x3xf32>)
%g = lossgrad.binary_cross_entropy_backward %dy, %x, %t : tensor<f32>, tensor<3xf32>, tensor<2x3xf32> -> tensor<3xf32>
// CHECK: BinaryCrossEntropyBackward: target: shape [2, 3] must broadcast to self [3] without enlarging it (rank 2 > 1) [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t, %w = "test.op"() : () -> (tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<4xf32>)
%g = lossgrad.binary_cross_entropy_backward %dy, %x, %t weight %w : tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<4xf32> -> tensor<2x3xf32>
// CHECK: BinaryCrossEntropyBackward: weight and self: shapes weight [4], self [2, 3] do not broadcast (axis -1: 4 vs 3) [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t, %p = "test.op"() : () -> (tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xi32>)
%g = lossgrad.binary_cross_entropy_with_logits_backward %dy, %x, %t pos_weight %p : tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xi32> -> tensor<2x3xf32>
// CHECK: BinaryCrossEntropyWithLogitsBackward: pos_weight: element type must be one of float16, bfloat16, float32, float64, got i32 [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t = "test.op"() : () -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>)
%g = lossgrad.binary_cross_entropy_backward %dy, %x, %t : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf64>
// CHECK: BinaryCrossEntropyBackward: result: type must be tensor<2x3xf32> (derived from the operands), got tensor<2x3xf64> [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t, %tw = "test.op"() : () -> (tensor<f32>, tensor<4x5xf32>, tensor<4xf32>, tensor<f32>)
%g = lossgrad.nll_loss_backward %dy, %x, %t, %tw : tensor<f32>, tensor<4x5xf32>, tensor<4xf32>, tensor<f32> -> tensor<4x5xf32>
// CHECK: NLLLossBackward: target: element type must be one of int64, int32, got f32 [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t, %tw = "test.op"() : () -> (tensor<f32>, tensor<4x5xf32>, tensor<3xi64>, tensor<f32>)
%g = lossgrad.nll_loss_backward %dy, %x, %t, %tw : tensor<f32>, tensor<4x5xf32>, tensor<3xi64>, tensor<f32> -> tensor<4x5xf32>
// CHECK: NLLLossBackward: target: shape [3] must be [4] (self without dimension 1) for self [4, 5] [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t, %tw, %w = "test.op"() : () -> (tensor<f32>, tensor<4x5xf32>, tensor<4xi64>, tensor<f32>, tensor<5xf16>)
%g = lossgrad.nll_loss_backward %dy, %x, %t, %tw weight %w : tensor<f32>, tensor<4x5xf32>, tensor<4xi64>, tensor<f32>, tensor<5xf16> -> tensor<4x5xf32>
// CHECK: NLLLossBackward: weight: element type must be self's (float32), got float16 [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t, %tw = "test.op"() : () -> (tensor<4xf32>, tensor<4x5xf32>, tensor<4xi64>, tensor<f32>)
%g = lossgrad.nll_loss_backward %dy, %x, %t, %tw reduction = sum : tensor<4xf32>, tensor<4x5xf32>, tensor<4xi64>, tensor<f32> -> tensor<4x5xf32>
// CHECK: NLLLossBackward: grad_output: shape [4] must be one element for self [4, 5] [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t, %tw = "test.op"() : () -> (tensor<f32>, tensor<4x5x2xf32>, tensor<4x2xi64>, tensor<f32>)
%g = lossgrad.nll_loss_backward %dy, %x, %t, %tw : tensor<f32>, tensor<4x5x2xf32>, tensor<4x2xi64>, tensor<f32> -> tensor<4x5x2xf32>
// CHECK: NLLLossBackward: self: shape [4, 5, 2] must be rank 2 or rank 1 for self [4, 5, 2] [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t, %tw = "test.op"() : () -> (tensor<f32>, tensor<2x4x3x3xf32>, tensor<2x3x3xi64>, tensor<2xf32>)
%g = lossgrad.nll_loss2d_backward %dy, %x, %t, %tw : tensor<f32>, tensor<2x4x3x3xf32>, tensor<2x3x3xi64>, tensor<2xf32> -> tensor<2x4x3x3xf32>
// CHECK: NLLLoss2dBackward: total_weight: shape [2] must be one element for self [2, 4, 3, 3] [aclnn 161002 ACLNN_ERR_PARAM_INVALID]

// -----

%dy, %x, %t, %tw = "test.op"() : () -> (tensor<f32>, tensor<4x5xf32>, tensor<4xui64>, tensor<f32>)
%g = lossgrad.nll_loss_backward %dy, %x, %t, %tw : tensor<f32>, tensor<4x5xf32>, tensor<4xui64>, tensor<f32> -> tensor<4x5xf32>
// CHECK: NLLLossBackward: target: element type must be one of int64, int32, got ui64 [aclnn 161002 ACLNN_ERR_PARAM_INVALID]
