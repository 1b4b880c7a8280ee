// Round trips of every lossgrad op: custom form -> custom form, custom -> generic -> custom,
// and the generic form itself (properties, the reduction enum, beta as f64).
// RUN: lossgrad-opt %s | lossgrad-opt | filecheck %s
// RUN: %roundtrip-generic
// RUN: lossgrad-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

func.func @kl_defaults(%dy: tensor<f32>, %x: tensor<4x8xf32>, %t: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %g = lossgrad.kl_div_backward %dy, %x, %t : tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %g : tensor<4x8xf32>
}
// CHECK-LABEL: func.func @kl_defaults(
// CHECK:         %{{.*}} = lossgrad.kl_div_backward %{{.*}}, %{{.*}}, %{{.*}} : tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// GENERIC-LABEL: sym_name = "kl_defaults"
// GENERIC:       "lossgrad.kl_div_backward"(%{{.*}}, %{{.*}}, %{{.*}}) <{log_target = false, reduction = #lossgrad<reduction mean>}> : (tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>

func.func @kl_all_props(%dy: tensor<?x1xbf16>, %x: tensor<?x?xbf16>, %t: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %g = lossgrad.kl_div_backward %dy, %x, %t reduction = batchmean log_target = true : tensor<?x1xbf16>, tensor<?x?xbf16>, tensor<?x?xbf16> -> tensor<?x?xbf16>
  func.return %g : tensor<?x?xbf16>
}
// CHECK-LABEL: func.func @kl_all_props(
// CHECK:         lossgrad.kl_div_backward %{{.*}}, %{{.*}}, %{{.*}} reduction = batchmean log_target = true : tensor<?x1xbf16>, tensor<?x?xbf16>, tensor<?x?xbf16> -> tensor<?x?xbf16>
// GENERIC:       "lossgrad.kl_div_backward"(%{{.*}}, %{{.*}}, %{{.*}}) <{reduction = #lossgrad<reduction batchmean>, log_target = true}>

func.func @kl_target_mixed(%dy: tensor<f64>, %x: tensor<3x5xf16>, %t: tensor<5xf32>) -> tensor<5xf32> {
  %g = lossgrad.kl_div_target_backward %dy, %x, %t reduction = sum : tensor<f64>, tensor<3x5xf16>, tensor<5xf32> -> tensor<5xf32>
  func.return %g : tensor<5xf32>
}
// CHECK-LABEL: func.func @kl_target_mixed(
// CHECK:         lossgrad.kl_div_target_backward %{{.*}}, %{{.*}}, %{{.*}} reduction = sum : tensor<f64>, tensor<3x5xf16>, tensor<5xf32> -> tensor<5xf32>
// GENERIC:       "lossgrad.kl_div_target_backward"(%{{.*}}, %{{.*}}, %{{.*}}) <{reduction = #lossgrad<reduction sum>, log_target = false}>

func.func @kl_target_log(%dy: tensor<f32>, %x: tensor<f32>, %t: tensor<f32>) -> tensor<f32> {
  %g = lossgrad.kl_div_target_backward %dy, %x, %t reduction = none log_target = true : tensor<f32>, tensor<f32>, tensor<f32> -> tensor<f32>
  func.return %g : tensor<f32>
}
// CHECK-LABEL: func.func @kl_target_log(
// CHECK:         lossgrad.kl_div_target_backward %{{.*}}, %{{.*}}, %{{.*}} reduction = none log_target = true : tensor<f32>, tensor<f32>, tensor<f32> -> tensor<f32>

func.func @smooth_defaults(%dy: tensor<f32>, %x: tensor<2x3xf32>, %t: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %g = lossgrad.smooth_l1_loss_backward %dy, %x, %t : tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  func.return %g : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @smooth_defaults(
// CHECK:         lossgrad.smooth_l1_loss_backward %{{.*}}, %{{.*}}, %{{.*}} : tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
// GENERIC:       "lossgrad.smooth_l1_loss_backward"(%{{.*}}, %{{.*}}, %{{.*}}) <{beta = 1.000000e+00 : f64, reduction = #lossgrad<reduction mean>}>

// beta is an f64: 0.1 keeps its double value (an f32 attribute would print 0.10000000149011612).
func.func @smooth_enlarging(%dy: tensor<4x1xf64>, %x: tensor<8xf32>, %t: tensor<8xbf16>) -> tensor<4x8xf64> {
  %g = lossgrad.smooth_l1_loss_backward %dy, %x, %t reduction = sum beta = 1.000000e-01 : tensor<4x1xf64>, tensor<8xf32>, tensor<8xbf16> -> tensor<4x8xf64>
  func.return %g : tensor<4x8xf64>
}
// CHECK-LABEL: func.func @smooth_enlarging(
// CHECK:         lossgrad.smooth_l1_loss_backward %{{.*}}, %{{.*}}, %{{.*}} reduction = sum beta = 1.000000e-01 : tensor<4x1xf64>, tensor<8xf32>, tensor<8xbf16> -> tensor<4x8xf64>
// GENERIC:       <{reduction = #lossgrad<reduction sum>, beta = 1.000000e-01 : f64}>

func.func @smooth_beta_zero_rank8(%dy: tensor<f16>, %x: tensor<1x2x1x2x1x2x1x2xf16>, %t: tensor<2x1x2x1x2x1x2x1xf16>) -> tensor<2x2x2x2x2x2x2x2xf16> {
  %g = lossgrad.smooth_l1_loss_backward %dy, %x, %t reduction = none beta = 0.000000e+00 : tensor<f16>, tensor<1x2x1x2x1x2x1x2xf16>, tensor<2x1x2x1x2x1x2x1xf16> -> tensor<2x2x2x2x2x2x2x2xf16>
  func.return %g : tensor<2x2x2x2x2x2x2x2xf16>
}
// CHECK-LABEL: func.func @smooth_beta_zero_rank8(
// CHECK:         lossgrad.smooth_l1_loss_backward {{.*}} reduction = none beta = 0.000000e+00 : tensor<f16>, tensor<1x2x1x2x1x2x1x2xf16>, tensor<2x1x2x1x2x1x2x1xf16> -> tensor<2x2x2x2x2x2x2x2xf16>

func.func @mse_defaults(%dy: tensor<f32>, %x: tensor<?x3xf32>, %t: tensor<3xf16>) -> tensor<?x3xf32> {
  %g = lossgrad.mse_loss_backward %dy, %x, %t : tensor<f32>, tensor<?x3xf32>, tensor<3xf16> -> tensor<?x3xf32>
  func.return %g : tensor<?x3xf32>
}
// CHECK-LABEL: func.func @mse_defaults(
// CHECK:         lossgrad.mse_loss_backward %{{.*}}, %{{.*}}, %{{.*}} : tensor<f32>, tensor<?x3xf32>, tensor<3xf16> -> tensor<?x3xf32>
// GENERIC:       "lossgrad.mse_loss_backward"(%{{.*}}, %{{.*}}, %{{.*}}) <{reduction = #lossgrad<reduction mean>}>

func.func @huber_delta(%dy: tensor<2x3xbf16>, %x: tensor<2x3xbf16>, %t: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %g = lossgrad.huber_loss_backward %dy, %x, %t reduction = none delta = 2.500000e-01 : tensor<2x3xbf16>, tensor<2x3xbf16>, tensor<2x3xbf16> -> tensor<2x3xbf16>
  func.return %g : tensor<2x3xbf16>
}
// CHECK-LABEL: func.func @huber_delta(
// CHECK:         lossgrad.huber_loss_backward %{{.*}}, %{{.*}}, %{{.*}} reduction = none delta = 2.500000e-01 : tensor<2x3xbf16>, tensor<2x3xbf16>, tensor<2x3xbf16> -> tensor<2x3xbf16>
// GENERIC:       "lossgrad.huber_loss_backward"(%{{.*}}, %{{.*}}, %{{.*}}) <{reduction = #lossgrad<reduction none>, delta = 2.500000e-01 : f64}>

func.func @soft_margin(%dy: tensor<4xf64>, %x: tensor<4xf64>, %t: tensor<4xf64>) -> tensor<4xf64> {
  %g = lossgrad.soft_margin_loss_backward %dy, %x, %t reduction = sum : tensor<4xf64>, tensor<4xf64>, tensor<4xf64> -> tensor<4xf64>
  func.return %g : tensor<4xf64>
}
// CHECK-LABEL: func.func @soft_margin(
// CHECK:         lossgrad.soft_margin_loss_backward %{{.*}}, %{{.*}}, %{{.*}} reduction = sum : tensor<4xf64>, tensor<4xf64>, tensor<4xf64> -> tensor<4xf64>

func.func @bce_no_weight(%dy: tensor<f32>, %x: tensor<2x3xf16>, %t: tensor<3xf32>) -> tensor<2x3xf16> {
  %g = lossgrad.binary_cross_entropy_backward %dy, %x, %t : tensor<f32>, tensor<2x3xf16>, tensor<3xf32> -> tensor<2x3xf16>
  func.return %g : tensor<2x3xf16>
}
// CHECK-LABEL: func.func @bce_no_weight(
// CHECK:         lossgrad.binary_cross_entropy_backward %{{.*}}, %{{.*}}, %{{.*}} : tensor<f32>, tensor<2x3xf16>, tensor<3xf32> -> tensor<2x3xf16>
// GENERIC:       "lossgrad.binary_cross_entropy_backward"(%{{.*}}, %{{.*}}, %{{.*}}) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>, reduction = #lossgrad<reduction mean>}>

func.func @bce_weight(%dy: tensor<f32>, %x: tensor<2x3xf32>, %t: tensor<2x3xf32>, %w: tensor<3xbf16>) -> tensor<2x3xf32> {
  %g = lossgrad.binary_cross_entropy_backward %dy, %x, %t weight %w reduction = sum : tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xbf16> -> tensor<2x3xf32>
  func.return %g : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @bce_weight(
// CHECK:         lossgrad.binary_cross_entropy_backward %{{.*}}, %{{.*}}, %{{.*}} weight %{{.*}} reduction = sum : tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xbf16> -> tensor<2x3xf32>
// GENERIC:       "lossgrad.binary_cross_entropy_backward"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{reduction = #lossgrad<reduction sum>, operandSegmentSizes = array<i32: 1, 1, 1, 1>}>

func.func @bce_logits_pos_weight_only(%dy: tensor<f32>, %x: tensor<2x3xf32>, %t: tensor<2x3xf32>, %p: tensor<3xf32>) -> tensor<2x3xf32> {
  %g = lossgrad.binary_cross_entropy_with_logits_backward %dy, %x, %t pos_weight %p : tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  func.return %g : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @bce_logits_pos_weight_only(
// CHECK:         lossgrad.binary_cross_entropy_with_logits_backward %{{.*}}, %{{.*}}, %{{.*}} pos_weight %{{.*}} : tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
// GENERIC:       "lossgrad.binary_cross_entropy_with_logits_backward"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 1>, reduction = #lossgrad<reduction mean>}>

func.func @bce_logits_both(%dy: tensor<2x3xf32>, %x: tensor<2x3xf32>, %t: tensor<2x3xf32>, %w: tensor<2x3xf32>, %p: tensor<3xf32>) -> tensor<2x3xf32> {
  %g = lossgrad.binary_cross_entropy_with_logits_backward %dy, %x, %t weight %w pos_weight %p reduction = none : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  func.return %g : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @bce_logits_both(
// CHECK:         lossgrad.binary_cross_entropy_with_logits_backward %{{.*}}, %{{.*}}, %{{.*}} weight %{{.*}} pos_weight %{{.*}} reduction = none : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>

func.func @nll_weight_ignore(%dy: tensor<f32>, %x: tensor<?x5xf32>, %t: tensor<?xi64>, %tw: tensor<f32>, %w: tensor<5xf32>) -> tensor<?x5xf32> {
  %g = lossgrad.nll_loss_backward %dy, %x, %t, %tw weight %w ignore_index = -3 : tensor<f32>, tensor<?x5xf32>, tensor<?xi64>, tensor<f32>, tensor<5xf32> -> tensor<?x5xf32>
  func.return %g : tensor<?x5xf32>
}
// CHECK-LABEL: func.func @nll_weight_ignore(
// CHECK:         lossgrad.nll_loss_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} weight %{{.*}} ignore_index = -3 : tensor<f32>, tensor<?x5xf32>, tensor<?xi64>, tensor<f32>, tensor<5xf32> -> tensor<?x5xf32>
// GENERIC:       "lossgrad.nll_loss_backward"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{ignore_index = -3 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1>, reduction = #lossgrad<reduction mean>}>

func.func @nll2d_none(%dy: tensor<2x3x3xf16>, %x: tensor<2x4x3x3xf16>, %t: tensor<2x3x3xi32>, %tw: tensor<1xf16>) -> tensor<2x4x3x3xf16> {
  %g = lossgrad.nll_loss2d_backward %dy, %x, %t, %tw reduction = none : tensor<2x3x3xf16>, tensor<2x4x3x3xf16>, tensor<2x3x3xi32>, tensor<1xf16> -> tensor<2x4x3x3xf16>
  func.return %g : tensor<2x4x3x3xf16>
}
// CHECK-LABEL: func.func @nll2d_none(
// CHECK:         lossgrad.nll_loss2d_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} reduction = none : tensor<2x3x3xf16>, tensor<2x4x3x3xf16>, tensor<2x3x3xi32>, tensor<1xf16> -> tensor<2x4x3x3xf16>
// GENERIC:       "lossgrad.nll_loss2d_backward"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{reduction = #lossgrad<reduction none>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0>, ignore_index = -100 : i64}>
