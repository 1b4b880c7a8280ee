// The count of t != 3 written with hfusion.compare <vne>, which AscendNPU IR 1.2.0's CPU
// runner computes as t == 3 (tests/hfusion/test_hfusion_classes_bishengir.py).
module {
func.func @f(%t: tensor<?xi64>) -> tensor<i64> attributes {hacc.entry, llvm.emit_c_interface, hacc.function_kind = #hacc.function_kind<HOST>} {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %t, %c0 : tensor<?xi64>
  %ii = arith.constant 3 : i64
  %z = arith.constant 0 : i64
  %et = tensor.empty(%n) : tensor<?xi1>
  %b1 = hfusion.compare {compare_fn = #hfusion.compare_fn<vne>} ins(%t, %ii : tensor<?xi64>, i64) outs(%et : tensor<?xi1>) -> tensor<?xi1>
  %e64 = tensor.empty(%n) : tensor<?xi64>
  %cnt = hfusion.cast {round_mode = #hfusion.round_mode<rint>} ins(%b1 : tensor<?xi1>) outs(%e64 : tensor<?xi64>) -> tensor<?xi64>
  %e0 = tensor.empty() : tensor<i64>
  %i0 = linalg.fill ins(%z : i64) outs(%e0 : tensor<i64>) -> tensor<i64>
  %s = linalg.reduce ins(%cnt : tensor<?xi64>) outs(%i0 : tensor<i64>) dimensions = [0]
    (%a: i64, %acc: i64) {
      %ad = arith.addi %acc, %a : i64
      linalg.yield %ad : i64
    }
  %e1 = tensor.empty() : tensor<i64>
  %m = linalg.elemwise_binary {fun = #linalg.binary_fn<max_signed>} ins(%s, %s : tensor<i64>, tensor<i64>) outs(%e1 : tensor<i64>) -> tensor<i64>
  return %m : tensor<i64>
}
func.func @lossgrad_cpu_runner_entry(%a: tensor<1xf32>) -> tensor<1xf32> attributes {hacc.function_kind = #hacc.function_kind<HOST>, hacc.host_func_type = #hacc.host_func_type<host_entry>, llvm.emit_c_interface} {
  return %a : tensor<1xf32>
}
}
