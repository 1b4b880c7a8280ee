// hfusion.gather followed by a cast: AscendNPU IR 1.2.0 fails to outline it.
func.func @f(%w: tensor<5xf16>, %t: tensor<6xi64>) -> tensor<6xf32> attributes {hacc.entry, hacc.function_kind = #hacc.function_kind<HOST>} {
  %eh = tensor.empty() : tensor<6xf16>
  %g = hfusion.gather ins(%w, %t : tensor<5xf16>, tensor<6xi64>) outs(%eh : tensor<6xf16>) axis = 0 -> tensor<6xf16>
  %e = tensor.empty() : tensor<6xf32>
  %gf = hfusion.cast {round_mode = #hfusion.round_mode<rint>} ins(%g : tensor<6xf16>) outs(%e : tensor<6xf32>) -> tensor<6xf32>
  return %gf : tensor<6xf32>
}
