// lower-lossgrad for CrossEntropyLossGrad (docs/level2.md, "Reductions before the gradient",
// "A gather"): the sums the gradient reads come first, each into a zero-filled 0-d f32
// named in lossgrad.reductions; the gradient's generic reads them after the inputs through
// maps to (); the weight of a row's target is a tensor.extract at select(valid, t, 0).
// RUN: lossgrad-opt %s --split-input-file -p lower-lossgrad | filecheck %s

// CHECK-NOT: lossgrad.cross_entropy

func.func @ce_mean_weight_smoothed(%g: tensor<f32>, %x: tensor<?x?xf32>, %t: tensor<?xi64>, %w: tensor<?xf32>) -> tensor<?x?xf32> {
  %r = lossgrad.cross_entropy_loss_grad %g, %x, %t weight %w ignore_index = 2 label_smoothing = 2.500000e-01 : tensor<f32>, tensor<?x?xf32>, tensor<?xi64>, tensor<?xf32> -> tensor<?x?xf32>
  func.return %r : tensor<?x?xf32>
}
// CHECK-LABEL: func.func @ce_mean_weight_smoothed(
// CHECK-SAME:    -> (tensor<?x?xf32>, tensor<i64>)
// CHECK-SAME:    lossgrad.divisor = "sum(weight[target]) over the kept rows", lossgrad.checks = ["target_range"], lossgrad.reductions = ["kept_weight", "class_weight"]
// A dynamic C comes from tensor.dim; ls/C reads it in f32 through uitofp.
// CHECK:         %[[CI:.*]] = tensor.dim %{{.*}}, %{{.*}} : tensor<?x?xf32>
// CHECK-NEXT:    %[[C:.*]] = arith.index_cast %[[CI]] : index to i64
// CHECK-NEXT:    %[[II:.*]] = arith.constant 2 : i64
// CHECK-NEXT:    %[[LS:.*]] = arith.constant 2.500000e-01 : f32
// CHECK-NEXT:    %[[CF:.*]] = arith.uitofp %[[C]] : i64 to f32
// D: w[t] of the valid rows, gathered at a safe index, added in order.
// CHECK:         %[[DZ:.*]] = linalg.fill
// CHECK-NEXT:    %[[D:.*]] = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]} ins(%{{.*}} : tensor<?xi64>) outs(%[[DZ]] : tensor<f32>)
// CHECK-NEXT:    ^bb0(%[[T:.*]]: i64, %[[ACC:.*]]: f32):
// CHECK:           arith.andi
// CHECK-NEXT:      %[[VALID:.*]] = arith.andi
// CHECK-NEXT:      %[[SAFE:.*]] = arith.select %[[VALID]], %[[T]], %{{.*}} : i64
// CHECK-NEXT:      %[[K:.*]] = arith.index_cast %[[SAFE]] : i64 to index
// CHECK-NEXT:      %[[WT:.*]] = tensor.extract %{{.*}}[%[[K]]] : tensor<?xf32>
// CHECK-NEXT:      %[[F0:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[TERM:.*]] = arith.select %[[VALID]], %[[WT]], %[[F0]] : f32
// CHECK-NEXT:      %[[SUM:.*]] = arith.addf %[[ACC]], %[[TERM]] : f32
// CHECK-NEXT:      linalg.yield %[[SUM]] : f32
// W: the weights' sum.
// CHECK:         %[[W:.*]] = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]} ins(%{{.*}} : tensor<?xf32>)
// CHECK-NEXT:    ^bb0(%[[WJ:.*]]: f32, %[[WACC:.*]]: f32):
// CHECK-NEXT:      %[[WSUM:.*]] = arith.addf %[[WACC]], %[[WJ]] : f32
// CHECK-NEXT:      linalg.yield %[[WSUM]] : f32
// The gradient reads g, lp, t, w, then D and W through maps to ().
// CHECK:         %[[R:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[D]], %[[W]] :
// CHECK-NEXT:    ^bb0(%[[G:.*]]: f32, %[[LP:.*]]: f32, %{{.*}}: i64, %[[WC:.*]]: f32, %[[DA:.*]]: f32, %[[WA:.*]]: f32, %{{.*}}: f32):
// The nll term a = select(valid, w[t] * -(g*(1-ls)/D), 0).
// CHECK:           %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      %[[KEEP:.*]] = arith.subf %[[ONE]], %[[LS]] : f32
// CHECK-NEXT:      %[[GN:.*]] = arith.mulf %[[G]], %[[KEEP]] : f32
// CHECK-NEXT:      %[[Q:.*]] = arith.divf %[[GN]], %[[DA]] : f32
// CHECK-NEXT:      %[[NQ:.*]] = arith.negf %[[Q]] : f32
// CHECK:           %[[WTG:.*]] = tensor.extract %{{.*}}[%{{.*}}] : tensor<?xf32>
// CHECK-NEXT:      %[[AW:.*]] = arith.mulf %[[WTG]], %[[NQ]] : f32
// CHECK-NEXT:      %[[A:.*]] = arith.select %{{.*}}, %[[AW]], %{{.*}} : f32
// CHECK-NEXT:      %[[AT:.*]] = arith.select %{{.*}}, %[[A]], %{{.*}} : f32
// The smoothing scale b = select(valid, -(g*(ls/C)/D), 0) and gl = [j = t]*a + b*w_j.
// CHECK-NEXT:      %[[LSC:.*]] = arith.divf %[[LS]], %[[CF]] : f32
// CHECK-NEXT:      %[[GS:.*]] = arith.mulf %[[G]], %[[LSC]] : f32
// CHECK-NEXT:      %[[QS:.*]] = arith.divf %[[GS]], %[[DA]] : f32
// CHECK-NEXT:      %[[NQS:.*]] = arith.negf %[[QS]] : f32
// CHECK-NEXT:      %[[B:.*]] = arith.select %{{.*}}, %[[NQS]], %{{.*}} : f32
// CHECK-NEXT:      %[[SM:.*]] = arith.mulf %[[B]], %[[WC]] : f32
// CHECK-NEXT:      %[[GL:.*]] = arith.addf %[[AT]], %[[SM]] : f32
// The row sum in closed form, a + b*W, and gl - exp(lp)*rowsum.
// CHECK-NEXT:      %[[BW:.*]] = arith.mulf %[[B]], %[[WA]] : f32
// CHECK-NEXT:      %[[RS:.*]] = arith.addf %[[A]], %[[BW]] : f32
// CHECK-NEXT:      %[[P:.*]] = math.exp %[[LP]] : f32
// CHECK-NEXT:      %[[PR:.*]] = arith.mulf %[[P]], %[[RS]] : f32
// CHECK-NEXT:      %[[OUT:.*]] = arith.subf %[[GL]], %[[PR]] : f32
// CHECK-NEXT:      linalg.yield %[[OUT]] : f32
// CHECK:         func.return %[[R]], %{{.*}} : tensor<?x?xf32>, tensor<i64>

// -----

func.func @ce_none_half(%g: tensor<3xf16>, %x: tensor<3x4xf16>, %t: tensor<3xi32>) -> tensor<3x4xf16> {
  %r = lossgrad.cross_entropy_loss_grad %g, %x, %t reduction = none : tensor<3xf16>, tensor<3x4xf16>, tensor<3xi32> -> tensor<3x4xf16>
  func.return %r : tensor<3x4xf16>
}
// Without smoothing, weight or mean: no reduction, no gather; the row sum is a itself, and
// the half result is computed in f32 and narrowed once.
// CHECK-LABEL: func.func @ce_none_half(
// CHECK-NOT:     lossgrad.reductions
// CHECK:         %[[R:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK-NEXT:    ^bb0(%[[G:.*]]: f16, %[[LP:.*]]: f16, %[[T32:.*]]: i32, %{{.*}}: f16):
// CHECK-NOT:       tensor.extract
// CHECK:           %[[NG:.*]] = arith.negf %{{.*}} : f32
// CHECK-NEXT:      %[[A:.*]] = arith.select %{{.*}}, %[[NG]], %{{.*}} : f32
// CHECK-NEXT:      %[[GL:.*]] = arith.select %{{.*}}, %[[A]], %{{.*}} : f32
// CHECK-NEXT:      %[[P:.*]] = math.exp %{{.*}} : f32
// CHECK-NEXT:      %[[PR:.*]] = arith.mulf %[[P]], %[[A]] : f32
// CHECK-NEXT:      %[[OUT:.*]] = arith.subf %[[GL]], %[[PR]] : f32
// CHECK-NEXT:      %[[H:.*]] = arith.truncf %[[OUT]] : f32 to f16
// CHECK-NEXT:      linalg.yield %[[H]] : f16
