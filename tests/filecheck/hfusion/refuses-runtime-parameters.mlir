// The run-time-parameter form (beta as an f64 argument) is refused with the form to use.
// RUN: not lossgrad-opt %s -p 'lower-lossgrad{runtime_parameters=true},convert-linalg-to-hfusion' 2>&1 | filecheck %s

func.func @params(%g: tensor<f32>, %x: tensor<?xf32>, %t: tensor<?xf32>) -> tensor<?xf32> {
  %r = lossgrad.smooth_l1_loss_backward %g, %x, %t reduction = mean beta = 5.000000e-01 : tensor<f32>, tensor<?xf32>, tensor<?xf32> -> tensor<?xf32>
  func.return %r : tensor<?xf32>
}
// CHECK: lossgrad-opt: error: {{.*}}: params: run-time parameters: the HFusion form takes the default lower-lossgrad form (runtime_parameters=false): AscendNPU IR 1.2.0 crashes on the f64 beta argument [aclnn 161002 ACLNN_ERR_PARAM_INVALID]
