// convert-linalg-to-hfusion: level-2 functions (as lower-lossgrad prints them) become the
// named form that AscendNPU IR's HFusion pipeline takes. The output reads back, in custom
// and generic form.
// RUN: lossgrad-opt %s -p convert-linalg-to-hfusion | filecheck %s
// RUN: lossgrad-opt %s -p convert-linalg-to-hfusion | lossgrad-opt | filecheck %s
// RUN: lossgrad-opt %s -p convert-linalg-to-hfusion --print-op-generic | lossgrad-opt | filecheck %s

func.func @sl1_f16(%g: tensor<f16>, %x: tensor<?x4xf16>, %t: tensor<1x4xf16>) -> tensor<?x4xf16> attributes {lossgrad.op_type = "SmoothL1LossBackward", lossgrad.attributes = {reduction = "mean", beta = 5.000000e-01 : f64}, lossgrad.divisor = "numel(broadcast(self, target))"} {
  %c0 = arith.constant 0 : index
  %dim = tensor.dim %x, %c0 : tensor<?x4xf16>
  %c4 = arith.constant 4 : index
  %numel = arith.muli %dim, %c4 : index
  %n_i64 = arith.index_cast %numel : index to i64
  %n = arith.uitofp %n_i64 : i64 to f32
  %one = arith.constant 1.000000e+00 : f32
  %scale = arith.divf %one, %n : f32
  %init = tensor.empty(%dim) : tensor<?x4xf16>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%g, %x, %t : tensor<f16>, tensor<?x4xf16>, tensor<1x4xf16>) outs(%init : tensor<?x4xf16>) {
  ^bb0(%0: f16, %1: f16, %2: f16, %3: f16):
    %4 = arith.extf %0 : f16 to f32
    %5 = arith.extf %1 : f16 to f32
    %6 = arith.extf %2 : f16 to f32
    %7 = arith.mulf %4, %scale : f32
    %8 = arith.constant 1.000000e+00 : f32
    %9 = arith.constant -1.000000e+00 : f32
    %10 = arith.subf %5, %6 : f32
    %11 = arith.constant 5.000000e-01 : f32
    %12 = arith.divf %10, %11 : f32
    %13 = arith.negf %11 : f32
    %14 = arith.cmpf ole, %10, %13 : f32
    %15 = arith.select %14, %9, %12 : f32
    %16 = arith.cmpf oge, %10, %11 : f32
    %17 = arith.select %16, %8, %15 : f32
    %18 = arith.mulf %7, %17 : f32
    %19 = arith.truncf %18 : f32 to f16
    linalg.yield %19 : f16
  } -> tensor<?x4xf16>
  func.return %r : tensor<?x4xf16>
}
// A 0-d half grad_output is a scalar widened on the scalar unit; self is widened at its
// shape; the broadcast target is widened at its own shape, its 1 collapsed and broadcast.
// The body is one named op per level-2 op, in order, and the result is rounded once.
// CHECK-LABEL: func.func @sl1_f16(
// CHECK-SAME:    attributes {lossgrad.op_type = "SmoothL1LossBackward", {{.*}}hacc.entry, hacc.function_kind = #hacc.function_kind<HOST>}
// CHECK:         %[[SCALE:.*]] = arith.divf %{{.*}}, %{{.*}} : f32
// CHECK:         %[[G:.*]] = tensor.extract %g[] : tensor<f16>
// CHECK-NEXT:    %[[GF:.*]] = arith.extf %[[G]] : f16 to f32
// CHECK:         %[[E:.*]] = tensor.empty(%{{.*}}) : tensor<?x4xf32>
// CHECK-NEXT:    %[[X:.*]] = hfusion.cast {round_mode = #hfusion.round_mode<rint>} ins(%x : tensor<?x4xf16>) outs(%[[E]] : tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT:    %[[E1:.*]] = tensor.empty() : tensor<1x4xf32>
// CHECK-NEXT:    %[[T1:.*]] = hfusion.cast {round_mode = #hfusion.round_mode<rint>} ins(%t : tensor<1x4xf16>) outs(%[[E1]] : tensor<1x4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:    %[[T:.*]] = tensor.collapse_shape %[[T1]] {{\[\[}}0 : i64, 1 : i64]] : tensor<1x4xf32> into tensor<4xf32>
// CHECK-NEXT:    %[[TB:.*]] = linalg.broadcast ins(%[[T]]:tensor<4xf32>) outs(%[[E]]:tensor<?x4xf32>) dimensions = [0]
// CHECK-NEXT:    %[[GE:.*]] = arith.mulf %[[GF]], %[[SCALE]] : f32
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    %[[MONE:.*]] = arith.constant -1.000000e+00 : f32
// CHECK-NEXT:    %[[D:.*]] = linalg.elemwise_binary {fun = #linalg.binary_fn<sub>} ins(%[[X]], %[[TB]] : tensor<?x4xf32>, tensor<?x4xf32>) outs(%[[E]] : tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT:    %[[BETA:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:    %[[Q:.*]] = linalg.elemwise_binary {fun = #linalg.binary_fn<div>} ins(%[[D]], %[[BETA]] : tensor<?x4xf32>, f32) outs(%[[E]] : tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT:    %[[NBETA:.*]] = arith.negf %[[BETA]] : f32
// CHECK-NEXT:    %[[EB:.*]] = tensor.empty(%{{.*}}) : tensor<?x4xi1>
// CHECK-NEXT:    %[[LO:.*]] = hfusion.compare {compare_fn = #hfusion.compare_fn<vle>} ins(%[[D]], %[[NBETA]] : tensor<?x4xf32>, f32) outs(%[[EB]] : tensor<?x4xi1>) -> tensor<?x4xi1>
// CHECK-NEXT:    %[[S1:.*]] = hfusion.select ins(%[[LO]], %[[MONE]], %[[Q]] : tensor<?x4xi1>, f32, tensor<?x4xf32>) outs(%[[E]] : tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT:    %[[HI:.*]] = hfusion.compare {compare_fn = #hfusion.compare_fn<vge>} ins(%[[D]], %[[BETA]] : tensor<?x4xf32>, f32) outs(%[[EB]] : tensor<?x4xi1>) -> tensor<?x4xi1>
// CHECK-NEXT:    %[[S2:.*]] = hfusion.select ins(%[[HI]], %[[ONE]], %[[S1]] : tensor<?x4xi1>, f32, tensor<?x4xf32>) outs(%[[E]] : tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT:    %[[V:.*]] = linalg.elemwise_binary {fun = #linalg.binary_fn<mul>} ins(%[[GE]], %[[S2]] : f32, tensor<?x4xf32>) outs(%[[E]] : tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT:    %[[EH:.*]] = tensor.empty(%{{.*}}) : tensor<?x4xf16>
// CHECK-NEXT:    %[[R:.*]] = hfusion.cast {round_mode = #hfusion.round_mode<rint>} ins(%[[V]] : tensor<?x4xf32>) outs(%[[EH]] : tensor<?x4xf16>) -> tensor<?x4xf16>
// CHECK-NEXT:    func.return %[[R]] : tensor<?x4xf16>
// CHECK-NOT:     linalg.generic

func.func @sl1_sign(%g: tensor<3x1xf32>, %x: tensor<3x4xf32>, %t: tensor<3x4xf32>) -> tensor<3x4xf32> attributes {lossgrad.op_type = "SmoothL1LossBackward", lossgrad.attributes = {reduction = "sum", beta = 0.000000e+00 : f64}} {
  %init = tensor.empty() : tensor<3x4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%g, %x, %t : tensor<3x1xf32>, tensor<3x4xf32>, tensor<3x4xf32>) outs(%init : tensor<3x4xf32>) {
  ^bb0(%0: f32, %1: f32, %2: f32, %3: f32):
    %4 = arith.constant 1.000000e+00 : f32
    %5 = arith.constant -1.000000e+00 : f32
    %6 = arith.subf %1, %2 : f32
    %7 = arith.constant 0.000000e+00 : f32
    %8 = arith.cmpf olt, %6, %7 : f32
    %9 = arith.select %8, %5, %7 : f32
    %10 = arith.cmpf ogt, %6, %7 : f32
    %11 = arith.select %10, %4, %9 : f32
    %12 = arith.mulf %0, %11 : f32
    linalg.yield %12 : f32
  } -> tensor<3x4xf32>
  func.return %r : tensor<3x4xf32>
}
// beta = 0: the inner select chooses between two scalars, so its false branch is filled
// (the HFusion pipeline needs one tensor operand); grad_output 3x1 is collapsed and
// broadcast along d1.
// CHECK-LABEL: func.func @sl1_sign(
// CHECK-NEXT:    %[[G:.*]] = tensor.collapse_shape %g {{\[\[}}0 : i64, 1 : i64]] : tensor<3x1xf32> into tensor<3xf32>
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<3x4xf32>
// CHECK-NEXT:    %[[GB:.*]] = linalg.broadcast ins(%[[G]]:tensor<3xf32>) outs(%[[E]]:tensor<3x4xf32>) dimensions = [1]
// CHECK:         %[[D:.*]] = linalg.elemwise_binary {fun = #linalg.binary_fn<sub>} ins(%x, %t : tensor<3x4xf32>, tensor<3x4xf32>)
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[EB:.*]] = tensor.empty() : tensor<3x4xi1>
// CHECK-NEXT:    %[[LT:.*]] = hfusion.compare {compare_fn = #hfusion.compare_fn<vlt>} ins(%[[D]], %[[ZERO]] : tensor<3x4xf32>, f32)
// CHECK-NEXT:    %[[ZEROS:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E]] : tensor<3x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    %[[S1:.*]] = hfusion.select ins(%[[LT]], %{{.*}}, %[[ZEROS]] : tensor<3x4xi1>, f32, tensor<3x4xf32>)
// CHECK-NEXT:    %[[GT:.*]] = hfusion.compare {compare_fn = #hfusion.compare_fn<vgt>} ins(%[[D]], %[[ZERO]] : tensor<3x4xf32>, f32)
// CHECK-NEXT:    %[[S2:.*]] = hfusion.select ins(%[[GT]], %{{.*}}, %[[S1]] : tensor<3x4xi1>, f32, tensor<3x4xf32>)
// CHECK-NEXT:    %[[R:.*]] = linalg.elemwise_binary {fun = #linalg.binary_fn<mul>} ins(%[[GB]], %[[S2]] : tensor<3x4xf32>, tensor<3x4xf32>)
// CHECK-NEXT:    func.return %[[R]] : tensor<3x4xf32>

func.func @kl_target_sum(%g: tensor<?x4xbf16>, %x: tensor<?x4xbf16>, %t: tensor<1x4xbf16>) -> tensor<1x4xbf16> attributes {lossgrad.op_type = "KlDivTargetBackward", lossgrad.attributes = {reduction = "batchmean", log_target = 0 : i64}, lossgrad.divisor = "self.shape[0]"} {
  %c0 = arith.constant 0 : index
  %dim = tensor.dim %x, %c0 : tensor<?x4xbf16>
  %n_i64 = arith.index_cast %dim : index to i64
  %n = arith.uitofp %n_i64 : i64 to f32
  %one = arith.constant 1.000000e+00 : f32
  %scale = arith.divf %one, %n : f32
  %init = tensor.empty() : tensor<1x4xf32>
  %zero = arith.constant 0.000000e+00 : f32
  %zeros = linalg.fill ins(%zero : f32) outs(%init : tensor<1x4xf32>) -> tensor<1x4xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (0, d1)>, affine_map<(d0, d1) -> (0, d1)>], iterator_types = ["reduction", "parallel"]} ins(%g, %x, %t : tensor<?x4xbf16>, tensor<?x4xbf16>, tensor<1x4xbf16>) outs(%zeros : tensor<1x4xf32>) {
  ^bb0(%0: bf16, %1: bf16, %2: bf16, %3: f32):
    %4 = arith.extf %0 : bf16 to f32
    %5 = arith.extf %1 : bf16 to f32
    %6 = arith.extf %2 : bf16 to f32
    %7 = arith.mulf %4, %scale : f32
    %8 = arith.constant 1.000000e+00 : f32
    %9 = math.log %6 : f32
    %10 = arith.addf %9, %8 : f32
    %11 = arith.subf %10, %5 : f32
    %12 = arith.mulf %7, %11 : f32
    %13 = arith.constant 0.000000e+00 : f32
    %14 = arith.cmpf oeq, %6, %13 : f32
    %15 = arith.select %14, %13, %12 : f32
    %16 = arith.addf %3, %15 : f32
    linalg.yield %16 : f32
  } -> tensor<1x4xf32>
  %init_1 = tensor.empty() : tensor<1x4xbf16>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%sum : tensor<1x4xf32>) outs(%init_1 : tensor<1x4xbf16>) {
  ^bb0(%17: f32, %18: bf16):
    %19 = arith.truncf %17 : f32 to bf16
    linalg.yield %19 : bf16
  } -> tensor<1x4xbf16>
  func.return %r : tensor<1x4xbf16>
}
// The result is summed over d0 (linalg.reduce from the fill's 0, accumulator first as in
// level 2), expanded back to 1x4 and rounded to bf16 once.
// CHECK-LABEL: func.func @kl_target_sum(
// CHECK:         %[[LOG:.*]] = linalg.elemwise_unary {fun = #linalg.unary_fn<log>}
// CHECK:         %[[EQ:.*]] = hfusion.compare {compare_fn = #hfusion.compare_fn<veq>}
// CHECK-NEXT:    %[[V:.*]] = hfusion.select ins(%[[EQ]], %{{.*}}, %{{.*}} : tensor<?x4xi1>, f32, tensor<?x4xf32>)
// CHECK-NEXT:    %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<4xf32>
// CHECK-NEXT:    %[[INIT:.*]] = linalg.fill ins(%[[Z]] : f32) outs(%[[E]] : tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[SUM:.*]] = linalg.reduce ins(%[[V]]:tensor<?x4xf32>) outs(%[[INIT]]:tensor<4xf32>) dimensions = [0]
// CHECK-NEXT:    (%[[IN:.*]]: f32, %[[ACC:.*]]: f32) {
// CHECK-NEXT:      %[[ADD:.*]] = arith.addf %[[ACC]], %[[IN]] : f32
// CHECK-NEXT:      linalg.yield %[[ADD]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[X:.*]] = tensor.expand_shape %[[SUM]] {{\[\[}}0 : i64, 1 : i64]] output_shape [1, 4] : tensor<4xf32> into tensor<1x4xf32>
// CHECK-NEXT:    %[[EH:.*]] = tensor.empty() : tensor<1x4xbf16>
// CHECK-NEXT:    %[[R:.*]] = hfusion.cast {round_mode = #hfusion.round_mode<rint>} ins(%[[X]] : tensor<1x4xf32>) outs(%[[EH]] : tensor<1x4xbf16>) -> tensor<1x4xbf16>
// CHECK-NEXT:    func.return %[[R]] : tensor<1x4xbf16>

func.func @kl_sum_f32(%g: tensor<f32>, %x: tensor<?x4xf32>, %t: tensor<4xf32>) -> tensor<4xf32> attributes {lossgrad.op_type = "KlDivTargetBackward", lossgrad.attributes = {reduction = "sum", log_target = 0 : i64}} {
  %init = tensor.empty() : tensor<4xf32>
  %zero = arith.constant 0.000000e+00 : f32
  %zeros = linalg.fill ins(%zero : f32) outs(%init : tensor<4xf32>) -> tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]} ins(%g, %x, %t : tensor<f32>, tensor<?x4xf32>, tensor<4xf32>) outs(%zeros : tensor<4xf32>) {
  ^bb0(%0: f32, %1: f32, %2: f32, %3: f32):
    %4 = arith.constant 1.000000e+00 : f32
    %5 = math.log %2 : f32
    %6 = arith.addf %5, %4 : f32
    %7 = arith.subf %6, %1 : f32
    %8 = arith.mulf %0, %7 : f32
    %9 = arith.constant 0.000000e+00 : f32
    %10 = arith.cmpf oeq, %2, %9 : f32
    %11 = arith.select %10, %9, %8 : f32
    %12 = arith.addf %3, %11 : f32
    linalg.yield %12 : f32
  } -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}
// A float32 sum, which no narrowing cast follows, reaches the return through max(s, s), the
// same numbers: returned straight from the linalg.reduce, AscendNPU IR 1.2.0's reduction
// schedule sums the tiles into a buffer it never initialises.
// CHECK-LABEL: func.func @kl_sum_f32(
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<4xf32>
// CHECK-NEXT:    %[[INIT:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[SUM:.*]] = linalg.reduce ins(%{{.*}}:tensor<?x4xf32>) outs(%[[INIT]]:tensor<4xf32>) dimensions = [0]
// CHECK:         }
// CHECK-NEXT:    %[[R:.*]] = linalg.elemwise_binary {fun = #linalg.binary_fn<max_signed>} ins(%[[SUM]], %[[SUM]] : tensor<4xf32>, tensor<4xf32>) outs(%[[E]] : tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %[[R]] : tensor<4xf32>

func.func @kl_target_ones(%g: tensor<f32>, %x: tensor<2x3xf32>, %t: tensor<1x1xf32>) -> tensor<1x1xf32> attributes {lossgrad.op_type = "KlDivTargetBackward", lossgrad.attributes = {reduction = "none", log_target = 0 : i64}} {
  %init = tensor.empty() : tensor<1x1xf32>
  %zero = arith.constant 0.000000e+00 : f32
  %zeros = linalg.fill ins(%zero : f32) outs(%init : tensor<1x1xf32>) -> tensor<1x1xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (0, 0)>, affine_map<(d0, d1) -> (0, 0)>], iterator_types = ["reduction", "reduction"]} ins(%g, %x, %t : tensor<f32>, tensor<2x3xf32>, tensor<1x1xf32>) outs(%zeros : tensor<1x1xf32>) {
  ^bb0(%0: f32, %1: f32, %2: f32, %3: f32):
    %4 = arith.constant 1.000000e+00 : f32
    %5 = math.log %2 : f32
    %6 = arith.addf %5, %4 : f32
    %7 = arith.subf %6, %1 : f32
    %8 = arith.mulf %0, %7 : f32
    %9 = arith.constant 0.000000e+00 : f32
    %10 = arith.cmpf oeq, %2, %9 : f32
    %11 = arith.select %10, %9, %8 : f32
    %12 = arith.addf %3, %11 : f32
    linalg.yield %12 : f32
  } -> tensor<1x1xf32>
  func.return %r : tensor<1x1xf32>
}
// A 1x1 result is summed over every loop to a 0-d tensor and broadcast back to 1x1 (xDSL
// rejects the expand_shape from rank 0 that MLIR takes); max(s, s) as in @kl_sum_f32.
// CHECK-LABEL: func.func @kl_target_ones(
// CHECK:         %[[SUM:.*]] = linalg.reduce ins(%{{.*}}:tensor<2x3xf32>) outs(%{{.*}}:tensor<f32>) dimensions = [0, 1]
// CHECK:         %[[KEPT:.*]] = linalg.elemwise_binary {fun = #linalg.binary_fn<max_signed>} ins(%[[SUM]], %[[SUM]] : tensor<f32>, tensor<f32>)
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<1x1xf32>
// CHECK-NEXT:    %[[R:.*]] = linalg.broadcast ins(%[[KEPT]]:tensor<f32>) outs(%[[E]]:tensor<1x1xf32>) dimensions = [0, 1]
// CHECK-NEXT:    func.return %[[R]] : tensor<1x1xf32>

func.func @kl_scalar_target(%g: tensor<f32>, %x: tensor<2x3xf32>, %t: tensor<f32>) -> tensor<2x3xf32> attributes {lossgrad.op_type = "KlDivBackward", lossgrad.attributes = {reduction = "none", log_target = 1 : i64}} {
  %init = tensor.empty() : tensor<2x3xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%g, %x, %t : tensor<f32>, tensor<2x3xf32>, tensor<f32>) outs(%init : tensor<2x3xf32>) {
  ^bb0(%0: f32, %1: f32, %2: f32, %3: f32):
    %4 = math.exp %2 : f32
    %5 = arith.mulf %0, %4 : f32
    %6 = arith.negf %5 : f32
    linalg.yield %6 : f32
  } -> tensor<2x3xf32>
  func.return %r : tensor<2x3xf32>
}
// A one-element target that exp reads is broadcast (exp exists only as a vector
// instruction); grad_output stays a scalar operand.
// CHECK-LABEL: func.func @kl_scalar_target(
// CHECK-NEXT:    %[[G:.*]] = tensor.extract %g[] : tensor<f32>
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<2x3xf32>
// CHECK-NEXT:    %[[T:.*]] = linalg.broadcast ins(%t:tensor<f32>) outs(%[[E]]:tensor<2x3xf32>) dimensions = [0, 1]
// CHECK-NEXT:    %[[EXP:.*]] = linalg.elemwise_unary {fun = #linalg.unary_fn<exp>} ins(%[[T]] : tensor<2x3xf32>)
// CHECK-NEXT:    %[[M:.*]] = linalg.elemwise_binary {fun = #linalg.binary_fn<mul>} ins(%[[G]], %[[EXP]] : f32, tensor<2x3xf32>)
// CHECK-NEXT:    %[[R:.*]] = linalg.elemwise_unary {fun = #linalg.unary_fn<negf>} ins(%[[M]] : tensor<2x3xf32>)
// CHECK-NEXT:    func.return %[[R]] : tensor<2x3xf32>

func.func @kl_scalar_product(%g: tensor<f32>, %x: tensor<2x3xf32>, %t: tensor<1x1xf32>) -> tensor<2x3xf32> attributes {lossgrad.op_type = "KlDivBackward", lossgrad.attributes = {reduction = "none", log_target = 0 : i64}} {
  %init = tensor.empty() : tensor<2x3xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (0, 0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%g, %x, %t : tensor<f32>, tensor<2x3xf32>, tensor<1x1xf32>) outs(%init : tensor<2x3xf32>) {
  ^bb0(%0: f32, %1: f32, %2: f32, %3: f32):
    %4 = arith.mulf %0, %2 : f32
    %5 = arith.negf %4 : f32
    linalg.yield %5 : f32
  } -> tensor<2x3xf32>
  func.return %r : tensor<2x3xf32>
}
// Everything the body reads is one element and no exp or log reads it: the value is computed
// on scalars and filled. A 1x1 target is read at [0, 0].
// CHECK-LABEL: func.func @kl_scalar_product(
// CHECK-NEXT:    %[[G:.*]] = tensor.extract %g[] : tensor<f32>
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[T:.*]] = tensor.extract %t[%[[ZERO]], %[[ZERO]]] : tensor<1x1xf32>
// CHECK-NEXT:    %[[M:.*]] = arith.mulf %[[G]], %[[T]] : f32
// CHECK-NEXT:    %[[N:.*]] = arith.negf %[[M]] : f32
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<2x3xf32>
// CHECK-NEXT:    %[[R:.*]] = linalg.fill ins(%[[N]] : f32) outs(%[[E]] : tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    func.return %[[R]] : tensor<2x3xf32>

func.func @kl_rank0(%g: tensor<f32>, %x: tensor<f32>, %t: tensor<f32>) -> tensor<f32> attributes {lossgrad.op_type = "KlDivBackward", lossgrad.attributes = {reduction = "mean", log_target = 0 : i64}, lossgrad.divisor = "numel(broadcast(self, target))"} {
  %scale = arith.constant 1.000000e+00 : f32
  %init = tensor.empty() : tensor<f32>
  %r = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>, affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []} ins(%g, %x, %t : tensor<f32>, tensor<f32>, tensor<f32>) outs(%init : tensor<f32>) {
  ^bb0(%0: f32, %1: f32, %2: f32, %3: f32):
    %4 = arith.mulf %0, %scale : f32
    %5 = arith.mulf %4, %2 : f32
    %6 = arith.negf %5 : f32
    linalg.yield %6 : f32
  } -> tensor<f32>
  func.return %r : tensor<f32>
}
// A 0-d iteration space keeps its operands as 0-d tensors (vector ops, not scalar code).
// CHECK-LABEL: func.func @kl_rank0(
// CHECK-NEXT:    %[[S:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<f32>
// CHECK-NEXT:    %[[GE:.*]] = linalg.elemwise_binary {fun = #linalg.binary_fn<mul>} ins(%g, %[[S]] : tensor<f32>, f32) outs(%[[E]] : tensor<f32>) -> tensor<f32>
// CHECK-NEXT:    %[[M:.*]] = linalg.elemwise_binary {fun = #linalg.binary_fn<mul>} ins(%[[GE]], %t : tensor<f32>, tensor<f32>)
// CHECK-NEXT:    %[[R:.*]] = linalg.elemwise_unary {fun = #linalg.unary_fn<negf>} ins(%[[M]] : tensor<f32>)
// CHECK-NEXT:    func.return %[[R]] : tensor<f32>

func.func @kl_target_empty(%g: tensor<f32>, %x: tensor<0x3xf16>, %t: tensor<1x3xf16>) -> tensor<1x3xf16> attributes {lossgrad.op_type = "KlDivTargetBackward", lossgrad.attributes = {reduction = "sum", log_target = 0 : i64}} {
  %init = tensor.empty() : tensor<1x3xf32>
  %zero = arith.constant 0.000000e+00 : f32
  %zeros = linalg.fill ins(%zero : f32) outs(%init : tensor<1x3xf32>) -> tensor<1x3xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (0, d1)>, affine_map<(d0, d1) -> (0, d1)>], iterator_types = ["reduction", "parallel"]} ins(%g, %x, %t : tensor<f32>, tensor<0x3xf16>, tensor<1x3xf16>) outs(%zeros : tensor<1x3xf32>) {
  ^bb0(%0: f32, %1: f16, %2: f16, %3: f32):
    %4 = arith.extf %1 : f16 to f32
    %5 = arith.extf %2 : f16 to f32
    %6 = arith.constant 1.000000e+00 : f32
    %7 = math.log %5 : f32
    %8 = arith.addf %7, %6 : f32
    %9 = arith.subf %8, %4 : f32
    %10 = arith.mulf %0, %9 : f32
    %11 = arith.constant 0.000000e+00 : f32
    %12 = arith.cmpf oeq, %5, %11 : f32
    %13 = arith.select %12, %11, %10 : f32
    %14 = arith.addf %3, %13 : f32
    linalg.yield %14 : f32
  } -> tensor<1x3xf32>
  %init_1 = tensor.empty() : tensor<1x3xf16>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%sum : tensor<1x3xf32>) outs(%init_1 : tensor<1x3xf16>) {
  ^bb0(%15: f32, %16: f16):
    %17 = arith.truncf %15 : f32 to f16
    linalg.yield %17 : f16
  } -> tensor<1x3xf16>
  func.return %r : tensor<1x3xf16>
}
// A statically empty iteration space computes nothing: the sum of no element is the fill's
// 0, rounded once. (AscendNPU IR 1.2.0 crashes on named ops over empty tensors.)
// CHECK-LABEL: func.func @kl_target_empty(
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<1x3xf32>
// CHECK-NEXT:    %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[S:.*]] = linalg.fill ins(%[[Z]] : f32) outs(%[[E]] : tensor<1x3xf32>) -> tensor<1x3xf32>
// CHECK-NEXT:    %[[EH:.*]] = tensor.empty() : tensor<1x3xf16>
// CHECK-NEXT:    %[[R:.*]] = hfusion.cast {round_mode = #hfusion.round_mode<rint>} ins(%[[S]] : tensor<1x3xf32>) outs(%[[EH]] : tensor<1x3xf16>) -> tensor<1x3xf16>
// CHECK-NEXT:    func.return %[[R]] : tensor<1x3xf16>

func.func @huber_scalar_go(%g: tensor<f32>, %x: tensor<2x3xf32>, %t: tensor<2x3xf32>) -> tensor<2x3xf32> attributes {lossgrad.op_type = "HuberLossBackward", lossgrad.attributes = {reduction = "none", delta = 5.000000e-01 : f64}} {
  %init = tensor.empty() : tensor<2x3xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%g, %x, %t : tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32>) outs(%init : tensor<2x3xf32>) {
  ^bb0(%0: f32, %1: f32, %2: f32, %3: f32):
    %4 = arith.constant 5.000000e-01 : f32
    %5 = arith.subf %1, %2 : f32
    %6 = arith.negf %0 : f32
    %7 = arith.mulf %6, %4 : f32
    %8 = arith.mulf %0, %4 : f32
    %9 = arith.mulf %5, %0 : f32
    %10 = arith.cmpf ogt, %5, %4 : f32
    %11 = arith.select %10, %8, %9 : f32
    %12 = arith.negf %4 : f32
    %13 = arith.cmpf olt, %5, %12 : f32
    %14 = arith.select %13, %7, %11 : f32
    linalg.yield %14 : f32
  } -> tensor<2x3xf32>
  func.return %r : tensor<2x3xf32>
}
// Huber in float32 with a 0-d grad_output: the scalar unit would compute (-g)*delta and
// g*delta while a vector op reads g itself in d*g. AscendNPU IR 1.2.0 fails to outline such
// a kernel ("outline single kernel failed"), so g is broadcast and every op on it is a
// vector op. (In a half type g is read widened, through one arith.extf, and stays scalar.)
// CHECK-LABEL: func.func @huber_scalar_go(
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<2x3xf32>
// CHECK-NEXT:    %[[G:.*]] = linalg.broadcast ins(%g:tensor<f32>) outs(%[[E]]:tensor<2x3xf32>) dimensions = [0, 1]
// CHECK-NEXT:    %[[DELTA:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:    %[[D:.*]] = linalg.elemwise_binary {fun = #linalg.binary_fn<sub>} ins(%x, %t : tensor<2x3xf32>, tensor<2x3xf32>)
// CHECK-NEXT:    %[[NG:.*]] = linalg.elemwise_unary {fun = #linalg.unary_fn<negf>} ins(%[[G]] : tensor<2x3xf32>)
// CHECK-NEXT:    %[[BELOW:.*]] = linalg.elemwise_binary {fun = #linalg.binary_fn<mul>} ins(%[[NG]], %[[DELTA]] : tensor<2x3xf32>, f32)
// CHECK-NEXT:    %[[ABOVE:.*]] = linalg.elemwise_binary {fun = #linalg.binary_fn<mul>} ins(%[[G]], %[[DELTA]] : tensor<2x3xf32>, f32)
// CHECK-NEXT:    %[[INSIDE:.*]] = linalg.elemwise_binary {fun = #linalg.binary_fn<mul>} ins(%[[D]], %[[G]] : tensor<2x3xf32>, tensor<2x3xf32>)
// CHECK-NOT:     tensor.extract
// CHECK:         hfusion.select ins(%{{.*}}, %[[ABOVE]], %[[INSIDE]] : tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>)
// CHECK-NOT:     tensor.extract
// CHECK:         hfusion.select ins(%{{.*}}, %[[BELOW]], %{{.*}} : tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>)

func.func @kl_chained_refusal(%g: tensor<f32>, %x: tensor<2x3xf32>, %t: tensor<f32>) -> tensor<2x3xf32> attributes {lossgrad.op_type = "KlDivBackward", lossgrad.attributes = {reduction = "none", log_target = 0 : i64}} {
  %init = tensor.empty() : tensor<2x3xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%g, %x, %t : tensor<f32>, tensor<2x3xf32>, tensor<f32>) outs(%init : tensor<2x3xf32>) {
  ^bb0(%0: f32, %1: f32, %2: f32, %3: f32):
    %4 = arith.mulf %0, %2 : f32
    %5 = arith.subf %1, %4 : f32
    %6 = arith.mulf %5, %0 : f32
    %7 = arith.negf %2 : f32
    %8 = arith.mulf %6, %7 : f32
    linalg.yield %8 : f32
  } -> tensor<2x3xf32>
  func.return %r : tensor<2x3xf32>
}
// (Not a formula: the rule's fixed point.) g is read by the scalar g*t and by the vector
// op (x - g*t)*g, so it is broadcast; then the vector op g*t reads t, which -t also reads
// on the scalar unit, so t is broadcast too.
// CHECK-LABEL: func.func @kl_chained_refusal(
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<2x3xf32>
// CHECK-NEXT:    %[[G:.*]] = linalg.broadcast ins(%g:tensor<f32>) outs(%[[E]]:tensor<2x3xf32>) dimensions = [0, 1]
// CHECK-NEXT:    %[[T:.*]] = linalg.broadcast ins(%t:tensor<f32>) outs(%[[E]]:tensor<2x3xf32>) dimensions = [0, 1]
// CHECK-NEXT:    %[[GT:.*]] = linalg.elemwise_binary {fun = #linalg.binary_fn<mul>} ins(%[[G]], %[[T]] : tensor<2x3xf32>, tensor<2x3xf32>)
// CHECK-NEXT:    %[[D:.*]] = linalg.elemwise_binary {fun = #linalg.binary_fn<sub>} ins(%x, %[[GT]] : tensor<2x3xf32>, tensor<2x3xf32>)
// CHECK-NEXT:    %[[M:.*]] = linalg.elemwise_binary {fun = #linalg.binary_fn<mul>} ins(%[[D]], %[[G]] : tensor<2x3xf32>, tensor<2x3xf32>)
// CHECK-NEXT:    %[[NT:.*]] = linalg.elemwise_unary {fun = #linalg.unary_fn<negf>} ins(%[[T]] : tensor<2x3xf32>)
// CHECK-NEXT:    %[[R:.*]] = linalg.elemwise_binary {fun = #linalg.binary_fn<mul>} ins(%[[M]], %[[NT]] : tensor<2x3xf32>, tensor<2x3xf32>)
// CHECK-NEXT:    func.return %[[R]] : tensor<2x3xf32>
