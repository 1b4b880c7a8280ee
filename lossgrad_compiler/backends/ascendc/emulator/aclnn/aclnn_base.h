// lossgrad_compiler Ascend C CPU emulation: aclnn status codes and the executor handle.
#pragma once

#include <cstdint>

#include "acl/acl.h"

typedef int32_t aclnnStatus;
constexpr aclnnStatus ACLNN_SUCCESS = 0;
constexpr aclnnStatus ACLNN_ERR_PARAM_NULLPTR = 161001;
constexpr aclnnStatus ACLNN_ERR_PARAM_INVALID = 161002;
constexpr aclnnStatus ACLNN_ERR_RUNTIME_ERROR = 361001;
constexpr aclnnStatus ACLNN_ERR_INNER = 561000;
constexpr aclnnStatus ACLNN_ERR_INNER_TILING_ERROR = 561002;
constexpr aclnnStatus ACLNN_ERR_INNER_FIND_KERNEL_ERROR = 561003;
constexpr aclnnStatus ACLNN_ERR_INNER_CREATE_EXECUTOR = 561101;
constexpr aclnnStatus ACLNN_ERR_INNER_NULLPTR = 561103;

struct aclOpExecutor;
struct aclIntArray;

// The message of the last failed aclnn call on this thread.
const char* aclGetRecentErrMsg();
