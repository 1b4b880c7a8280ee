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
