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
// CHECK: 'hfusion.compare' compares two values of one float or integer type into i1, got f32, f32 -> f32

// -----

%c = "test.op"() : () -> tensor<4xf32>
%x = "test.op"() : () -> tensor<4xf32>
%r = hfusion.select ins(%c, %x, %x : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) outs(%x : tensor<4xf32>) -> tensor<4xf32>
// CHECK: 'hfusion.select' takes an i1 condition and two values of the output's element type f32, got f32, f32, f32

// -----

%x = "test.op"() : () -> tensor<4xf32>
%r = hfusion.cast {round_mode = #hfusion.round_mode<rint>} ins(%x : tensor<4xf32>) outs(%x : tensor<4xf32>) -> tensor<4xf16>
// CHECK: 'hfusion.cast' returns its output's type tensor<4xf32>

// -----

%x = "test.op"() : () -> tensor<4xf32>
%r = hfusion.elemwise_binary {fun = #hfusion.binary_fn<vand>} ins(%x, %x : tensor<4xf32>, tensor<4xf32>) outs(%x : tensor<4xf32>) -> tensor<4xf32>
// CHECK: 'hfusion.elemwise_binary' inputs and output have one integer type here, got f32, f32 -> f32

// -----

%x = "test.op"() : () -> tensor<4xbf16>
%e = "test.op"() : () -> tensor<4xi32>
%r = hfusion.bitcast ins(%x : tensor<4xbf16>) outs(%e : tensor<4xi32>) -> tensor<4xi32>
// CHECK: 'hfusion.bitcast' reinterprets bits as a type of the same width, got bf16 -> i32

// -----

%c0 = "test.op"() : () -> index
%e = "test.op"() : () -> tensor<4x5xi64>
%r = hfusion.arange offset[%c0] strides[%c0] outs(%e : tensor<4x5xi64>) -> tensor<4x5xi64>
// CHECK: 'hfusion.arange' fills an integer tensor and takes one stride per dimension

// -----

%x = "test.op"() : () -> tensor<4xi1>
%e = "test.op"() : () -> tensor<4xi1>
%r = hfusion.cast {round_mode = #hfusion.round_mode<rint>} ins(%x : tensor<4xi1>) outs(%e : tensor<4xi1>) -> tensor<4xi1>
// CHECK: 'hfusion.cast' casts between float types, or from an integer (i1 a mask) to an integer but i1, here; got i1 -> i1
