// lower-lossgrad: the body of every formula of docs/level2.md (op x log_target x beta form),
// the static reduction scale, and no lossgrad op left (unused ones included).
// RUN: lossgrad-opt %s --split-input-file -p lower-lossgrad | filecheck %s
// RUN: lossgrad-opt %s --split-input-file -p lower-lossgrad,canonicalize,cse | filecheck %s --check-prefix=CANON

// CHECK-NOT: lossgrad.
// CANON-NOT: lossgrad.

func.func @kl_none(%dy: tensor<2x3xf32>, %x: tensor<2x3xf32>, %t: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %g = lossgrad.kl_div_backward %dy, %x, %t reduction = none : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  func.return %g : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @kl_none(
// CHECK-SAME:      %[[DY:.*]]: tensor<2x3xf32>, %[[X:.*]]: tensor<2x3xf32>, %[[T:.*]]: tensor<2x3xf32>)
// CHECK-NEXT:    %[[INIT:.*]] = tensor.empty() : tensor<2x3xf32>
// CHECK-NEXT:    %[[G:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%[[DY]], %[[X]], %[[T]] : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) outs(%[[INIT]] : tensor<2x3xf32>) {
// CHECK-NEXT:    ^bb0(%[[A:.*]]: f32, %{{.*}}: f32, %[[C:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %[[A]], %[[C]] : f32
// CHECK-NEXT:      %[[N:.*]] = arith.negf %[[M]] : f32
// CHECK-NEXT:      linalg.yield %[[N]] : f32
// CHECK-NEXT:    } -> tensor<2x3xf32>
// CHECK-NEXT:    func.return %[[G]] : tensor<2x3xf32>
// CANON-LABEL: func.func @kl_none(
// CANON:         linalg.generic

// -----

func.func @kl_log_mean(%dy: tensor<f32>, %x: tensor<2x3xf32>, %t: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %g = lossgrad.kl_div_backward %dy, %x, %t reduction = mean log_target = true : tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  func.return %g : tensor<2x3xf32>
}
// mean over numel(B) = 6: the scale is the constant f32(1) / f32(6).
// CHECK-LABEL: func.func @kl_log_mean(
// CHECK-NEXT:    %[[S:.*]] = arith.constant 0.166666672 : f32
// CHECK-NEXT:    %[[INIT:.*]] = tensor.empty() : tensor<2x3xf32>
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK-NEXT:    ^bb0(%[[A:.*]]: f32, %{{.*}}: f32, %[[C:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[GE:.*]] = arith.mulf %[[A]], %[[S]] : f32
// CHECK-NEXT:      %[[E:.*]] = math.exp %[[C]] : f32
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %[[GE]], %[[E]] : f32
// CHECK-NEXT:      %[[N:.*]] = arith.negf %[[M]] : f32
// CHECK-NEXT:      linalg.yield %[[N]] : f32

// -----

func.func @klt_sum(%dy: tensor<f64>, %x: tensor<2x3xf64>, %t: tensor<2x3xf64>) -> tensor<2x3xf64> {
  %g = lossgrad.kl_div_target_backward %dy, %x, %t reduction = sum : tensor<f64>, tensor<2x3xf64>, tensor<2x3xf64> -> tensor<2x3xf64>
  func.return %g : tensor<2x3xf64>
}
// sum: no scale at all; t == 0 is selected to 0.
// CHECK-LABEL: func.func @klt_sum(
// CHECK-NEXT:    tensor.empty() : tensor<2x3xf64>
// CHECK-NEXT:    linalg.generic
// CHECK-NEXT:    ^bb0(%[[A:.*]]: f64, %[[B:.*]]: f64, %[[C:.*]]: f64, %{{.*}}: f64):
// CHECK-NEXT:      %[[ONE:.*]] = arith.constant 1.000000e+00 : f64
// CHECK-NEXT:      %[[L:.*]] = math.log %[[C]] : f64
// CHECK-NEXT:      %[[P:.*]] = arith.addf %[[L]], %[[ONE]] : f64
// CHECK-NEXT:      %[[D:.*]] = arith.subf %[[P]], %[[B]] : f64
// CHECK-NEXT:      %[[V:.*]] = arith.mulf %[[A]], %[[D]] : f64
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT:      %[[EQ:.*]] = arith.cmpf oeq, %[[C]], %[[ZERO]] : f64
// CHECK-NEXT:      %[[R:.*]] = arith.select %[[EQ]], %[[ZERO]], %[[V]] : f64
// CHECK-NEXT:      linalg.yield %[[R]] : f64

// -----

func.func @klt_log_batchmean(%dy: tensor<f32>, %x: tensor<4x3xf32>, %t: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %g = lossgrad.kl_div_target_backward %dy, %x, %t reduction = batchmean log_target = true : tensor<f32>, tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
  func.return %g : tensor<4x3xf32>
}
// batchmean divides by self's dim 0 (4); PyTorch's order (ge*(t - x))*exp(t) + ge*exp(t).
// CHECK-LABEL: func.func @klt_log_batchmean(
// CHECK-NEXT:    %[[S:.*]] = arith.constant 2.500000e-01 : f32
// CHECK:         ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %[[C:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[GE:.*]] = arith.mulf %[[A]], %[[S]] : f32
// CHECK-NEXT:      %[[E:.*]] = math.exp %[[C]] : f32
// CHECK-NEXT:      %[[D:.*]] = arith.subf %[[C]], %[[B]] : f32
// CHECK-NEXT:      %[[GD:.*]] = arith.mulf %[[GE]], %[[D]] : f32
// CHECK-NEXT:      %[[GDE:.*]] = arith.mulf %[[GD]], %[[E]] : f32
// CHECK-NEXT:      %[[GEE:.*]] = arith.mulf %[[GE]], %[[E]] : f32
// CHECK-NEXT:      %[[R:.*]] = arith.addf %[[GDE]], %[[GEE]] : f32
// CHECK-NEXT:      linalg.yield %[[R]] : f32

// -----

func.func @sl1_clamp(%dy: tensor<f32>, %x: tensor<2x3xf32>, %t: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %g = lossgrad.smooth_l1_loss_backward %dy, %x, %t beta = 5.000000e-01 : tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  func.return %g : tensor<2x3xf32>
}
// CHECK-LABEL: func.func @sl1_clamp(
// CHECK-NEXT:    %[[S:.*]] = arith.constant 0.166666672 : f32
// CHECK:         ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %[[C:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[GE:.*]] = arith.mulf %[[A]], %[[S]] : f32
// CHECK-NEXT:      %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      %[[MONE:.*]] = arith.constant -1.000000e+00 : f32
// CHECK-NEXT:      %[[D:.*]] = arith.subf %[[B]], %[[C]] : f32
// CHECK-NEXT:      %[[BETA:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:      %[[Q:.*]] = arith.divf %[[D]], %[[BETA]] : f32
// CHECK-NEXT:      %[[NB:.*]] = arith.negf %[[BETA]] : f32
// CHECK-NEXT:      %[[LE:.*]] = arith.cmpf ole, %[[D]], %[[NB]] : f32
// CHECK-NEXT:      %[[LOW:.*]] = arith.select %[[LE]], %[[MONE]], %[[Q]] : f32
// CHECK-NEXT:      %[[GE2:.*]] = arith.cmpf oge, %[[D]], %[[BETA]] : f32
// CHECK-NEXT:      %[[CL:.*]] = arith.select %[[GE2]], %[[ONE]], %[[LOW]] : f32
// CHECK-NEXT:      %[[R:.*]] = arith.mulf %[[GE]], %[[CL]] : f32
// CHECK-NEXT:      linalg.yield %[[R]] : f32

// -----

func.func @sl1_sign(%dy: tensor<2x3xf64>, %x: tensor<2x3xf64>, %t: tensor<2x3xf64>) -> tensor<2x3xf64> {
  %g = lossgrad.smooth_l1_loss_backward %dy, %x, %t reduction = sum beta = 0.000000e+00 : tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3xf64> -> tensor<2x3xf64>
  func.return %g : tensor<2x3xf64>
}
// beta == 0: the sign form, no division.
// CHECK-LABEL: func.func @sl1_sign(
// CHECK:         ^bb0(%[[A:.*]]: f64, %[[B:.*]]: f64, %[[C:.*]]: f64, %{{.*}}: f64):
// CHECK-NEXT:      %[[ONE:.*]] = arith.constant 1.000000e+00 : f64
// CHECK-NEXT:      %[[MONE:.*]] = arith.constant -1.000000e+00 : f64
// CHECK-NEXT:      %[[D:.*]] = arith.subf %[[B]], %[[C]] : f64
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT:      %[[LT:.*]] = arith.cmpf olt, %[[D]], %[[ZERO]] : f64
// CHECK-NEXT:      %[[NEG:.*]] = arith.select %[[LT]], %[[MONE]], %[[ZERO]] : f64
// CHECK-NEXT:      %[[GT:.*]] = arith.cmpf ogt, %[[D]], %[[ZERO]] : f64
// CHECK-NEXT:      %[[SG:.*]] = arith.select %[[GT]], %[[ONE]], %[[NEG]] : f64
// CHECK-NEXT:      %[[R:.*]] = arith.mulf %[[A]], %[[SG]] : f64
// CHECK-NEXT:      linalg.yield %[[R]] : f64

// -----

func.func @sl1_beta_rounds_to_zero(%dy: tensor<f32>, %x: tensor<3xf32>, %t: tensor<3xf32>, %x64: tensor<3xf64>) -> (tensor<3xf32>, tensor<3xf64>) {
  %g = lossgrad.smooth_l1_loss_backward %dy, %x, %t reduction = none beta = 1.000000e-50 : tensor<f32>, tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %h = lossgrad.smooth_l1_loss_backward %dy, %x64, %t reduction = none beta = 1.000000e-50 : tensor<f32>, tensor<3xf64>, tensor<3xf32> -> tensor<3xf64>
  func.return %g, %h : tensor<3xf32>, tensor<3xf64>
}
// beta = 1e-50 is 0 in f32 (sign form) but not in f64 (the clamp form divides by it).
// CHECK-LABEL: func.func @sl1_beta_rounds_to_zero(
// CHECK:         ^bb0(%{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32):
// CHECK-NOT:       arith.divf
// CHECK:           arith.cmpf ogt
// CHECK:           linalg.yield
// CHECK:         ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f64, %[[C:.*]]: f32, %{{.*}}: f64):
// CHECK-NEXT:      %[[A64:.*]] = arith.extf %[[A]] : f32 to f64
// CHECK-NEXT:      %[[C64:.*]] = arith.extf %[[C]] : f32 to f64
// CHECK:           %[[D:.*]] = arith.subf %[[B]], %[[C64]] : f64
// CHECK-NEXT:      %[[BETA:.*]] = arith.constant 1.000000e-50 : f64
// CHECK-NEXT:      arith.divf %[[D]], %[[BETA]] : f64

// -----

func.func @unused_is_lowered(%dy: tensor<f32>, %x: tensor<3xf32>, %t: tensor<3xf32>) {
  %g = lossgrad.kl_div_backward %dy, %x, %t : tensor<f32>, tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  func.return
}
// No dead-code elimination before lowering: an unused op is lowered too. (xDSL's canonicalize
// and dce keep an unused linalg.generic: they do not know it has no side effects.)
// CHECK-LABEL: func.func @unused_is_lowered(
// CHECK:         linalg.generic
// CHECK:         func.return
// CANON-LABEL: func.func @unused_is_lowered(
// CANON:         linalg.generic
