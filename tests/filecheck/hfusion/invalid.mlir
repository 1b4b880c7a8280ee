// The verifiers of the HFusion form's ops.
// RUN: lossgrad-opt %s --split-input-file --verify-diagnostics | filecheck %s

%x = "test.op"() : () -> tensor<4xf32>
%e = "test.op"() : () -> tensor<5xf32>
%r = linalg.elemwise_binary {fun = #linalg.binary_fn<add>} ins(%x, %x : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<5xf32>) -> tensor<5xf32>
// CHECK: 'linalg.elemwise_binary' inputs are scalars or tensors of the output's shape tensor<5xf32>, got tensor<4xf32>

// -----

%x = "test.op"() : () -> tensor<4xf32>
%h = "test.op"() : () -> tensor<4xf16>
%r = linalg.elemwise_binary {fun = #linalg.binary_fn<mul>} ins(%x, %h : tensor<4xf32>, tensor<4xf16>) outs(%x : tensor<4xf32>) -> tensor<4xf32>
// CHECK: 'linalg.elemwise_binary' inputs and output have one float element type, got f32, f16 -> f32

// -----

%x = "test.op"() : () -> tensor<4xf32>
%r = linalg.elemwise_binary {fun = #linalg.binary_fn<div_unsigned>} ins(%x, %x : tensor<4xf32>, tensor<4xf32>) outs(%x : tensor<4xf32>) -> tensor<4xf32>
// CHECK: 'linalg.elemwise_binary' fun = #linalg.binary_fn<div_unsigned> is not modelled

// -----

%x = "test.op"() : () -> tensor<4xf32>
%r = linalg.elemwise_unary {fun = #linalg.unary_fn<exp>} ins(%x, %x : tensor<4xf32>, tensor<4xf32>) outs(%x : tensor<4xf32>) -> tensor<4xf32>
// CHECK: 'linalg.elemwise_unary' takes 1 inputs

// -----

%x = "test.op"() : () -> tensor<4xf32>
%e = "test.op"() : () -> tensor<4xf16>
%r = hfusion.cast {round_mode = #hfusion.round_mode<floor>} ins(%x : tensor<4xf32>) outs(%e : tensor<4xf16>) -> tensor<4xf16>
// CHECK: 'hfusion.cast' round_mode = #hfusion.round_mode<floor> is not modelled

// -----

%x = "test.op"() : () -> tensor<4xf32>
%e = "test.op"() : () -> tensor<4xf32>
%r = hfusion.compare {compare_fn = #hfusion.compare_fn<veq>} ins(%x, %x : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
// CHECK: 'hfusion.compare' compares two values of one float type into i1, got f32, f32 -> f32

// -----

%c = "test.op"() : () -> tensor<4xf32>
%x = "test.op"() : () -> tensor<4xf32>
%r = hfusion.select ins(%c, %x, %x : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) outs(%x : tensor<4xf32>) -> tensor<4xf32>
// CHECK: 'hfusion.select' takes an i1 condition and two values of the output's element type f32, got f32, f32, f32

// -----

%x = "test.op"() : () -> tensor<4xf32>
%r = hfusion.cast {round_mode = #hfusion.round_mode<rint>} ins(%x : tensor<4xf32>) outs(%x : tensor<4xf32>) -> tensor<4xf16>
// CHECK: 'hfusion.cast' returns its output's type tensor<4xf32>
