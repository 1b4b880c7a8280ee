module {
  func.func @sig_tiling_function(%arg0: tensor<?xf32>) attributes {hacc.function_kind = #hacc.function_kind<HOST>} {
    return
  }
  func.func @sig_0_0(%arg0: tensor<?xf32>) -> tensor<?xf32> attributes {hacc.block_dim = 48 : i64, hacc.entry, hacc.function_kind = #hacc.function_kind<DEVICE>, hfusion.fusion_kind = #hfusion.fusion_kind<PURE_ELEMWISE>} {
    %0 = hivm.hir.load ins(%arg0 : tensor<?xf32>) outs(%arg0 : tensor<?xf32>) -> tensor<?xf32>
    annotation.mark %0 {buffer_size_in_byte = 65536 : i64} : tensor<?xf32>
    annotation.mark %1 {buffer_size_in_byte = 2048 : i64} : tensor<?xi1>
    %2 = hivm.hir.vmul ins(%0, %cst : tensor<?xf32>, f32) outs(%0 : tensor<?xf32>) -> tensor<?xf32>
    %3 = hivm.hir.vmul ins(%2, %cst : tensor<?xf32>, f32) outs(%0 : tensor<?xf32>) -> tensor<?xf32>
    %4 = hivm.hir.store ins(%3 : tensor<?xf32>) outs(%arg0 : tensor<?xf32>) -> tensor<?xf32>
    return %4 : tensor<?xf32>
  }
  func.func @sig(%arg0: tensor<?xf32>) -> tensor<?xf32> attributes {hacc.entry, hacc.function_kind = #hacc.function_kind<HOST>, hfusion.fusion_kind = #hfusion.fusion_kind<PURE_ELEMWISE>} {
    %0 = linalg.generic {indexing_maps = []} ins() outs(%arg0 : tensor<?xf32>) {
    ^bb0(%x: f32):
      linalg.yield %x : f32
    } -> tensor<?xf32>
    return %0 : tensor<?xf32>
  }
}
