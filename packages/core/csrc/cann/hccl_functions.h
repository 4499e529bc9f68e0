// The HCCL functions torch-npu calls, as one X-macro list (the same scheme as
// acl_functions.h): the loader (npu/HcclInterface.cpp) resolves them from
// CANN's libhccl.so or from the simulator, and the simulator checks that it
// defines each with this exact signature.
//
//   X(return_type, name, (parameter list), (argument names))
#pragma once

#include "acl_types.h"
#include "hccl_types.h"

#define TORCH_NPU_HCCL_FUNCTIONS(X)                                            \
  X(HcclResult, HcclGetRootInfo, (HcclRootInfo * rootInfo), (rootInfo))        \
  X(HcclResult, HcclCommInitRootInfo,                                          \
    (uint32_t nRanks, const HcclRootInfo* rootInfo, uint32_t rank,             \
     HcclComm* comm),                                                          \
    (nRanks, rootInfo, rank, comm))                                            \
  /* config: see HcclCommConfig in hccl_types.h                          */    \
  X(HcclResult, HcclCommInitRootInfoConfig,                                    \
    (uint32_t nRanks, const HcclRootInfo* rootInfo, uint32_t rank,             \
     const HcclCommConfig* config, HcclComm* comm),                            \
    (nRanks, rootInfo, rank, config, comm))                                    \
  /* clusterInfo: the path of a rank table (RANK_TABLE_FILE)            */    \
  X(HcclResult, HcclCommInitClusterInfo,                                       \
    (const char* clusterInfo, uint32_t rank, HcclComm* comm),                  \
    (clusterInfo, rank, comm))                                                 \
  X(HcclResult, HcclCommInitClusterInfoConfig,                                 \
    (const char* clusterInfo, uint32_t rank, HcclCommConfig* config,           \
     HcclComm* comm),                                                          \
    (clusterInfo, rank, config, comm))                                         \
  X(HcclResult, HcclCommDestroy, (HcclComm comm), (comm))                      \
  X(HcclResult, HcclGetRankSize, (HcclComm comm, uint32_t * rankSize),         \
    (comm, rankSize))                                                          \
  X(HcclResult, HcclGetRankId, (HcclComm comm, uint32_t * rank), (comm, rank)) \
  X(HcclResult, HcclGetCommAsyncError, (HcclComm comm, HcclResult * asyncError), \
    (comm, asyncError))                                                        \
  X(const char*, HcclGetErrorString, (HcclResult code), (code))                \
  X(HcclResult, HcclAllReduce,                                                 \
    (void* sendBuf, void* recvBuf, uint64_t count, HcclDataType dataType,      \
     HcclReduceOp op, HcclComm comm, aclrtStream stream),                      \
    (sendBuf, recvBuf, count, dataType, op, comm, stream))                     \
  X(HcclResult, HcclBroadcast,                                                 \
    (void* buf, uint64_t count, HcclDataType dataType, uint32_t root,          \
     HcclComm comm, aclrtStream stream),                                       \
    (buf, count, dataType, root, comm, stream))                                \
  X(HcclResult, HcclReduce,                                                    \
    (void* sendBuf, void* recvBuf, uint64_t count, HcclDataType dataType,      \
     HcclReduceOp op, uint32_t root, HcclComm comm, aclrtStream stream),       \
    (sendBuf, recvBuf, count, dataType, op, root, comm, stream))               \
  X(HcclResult, HcclAllGather,                                                 \
    (void* sendBuf, void* recvBuf, uint64_t sendCount, HcclDataType dataType,  \
     HcclComm comm, aclrtStream stream),                                       \
    (sendBuf, recvBuf, sendCount, dataType, comm, stream))                     \
  X(HcclResult, HcclReduceScatter,                                             \
    (void* sendBuf, void* recvBuf, uint64_t recvCount, HcclDataType dataType,  \
     HcclReduceOp op, HcclComm comm, aclrtStream stream),                      \
    (sendBuf, recvBuf, recvCount, dataType, op, comm, stream))                 \
  X(HcclResult, HcclBarrier, (HcclComm comm, aclrtStream stream), (comm, stream)) \
  X(HcclResult, HcclSend,                                                      \
    (void* sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank,  \
     HcclComm comm, aclrtStream stream),                                       \
    (sendBuf, count, dataType, destRank, comm, stream))                        \
  X(HcclResult, HcclRecv,                                                      \
    (void* recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank,   \
     HcclComm comm, aclrtStream stream),                                       \
    (recvBuf, count, dataType, srcRank, comm, stream))                         \
  X(HcclResult, HcclBatchSendRecv,                                             \
    (HcclSendRecvItem * sendRecvInfo, uint32_t itemNum, HcclComm comm,         \
     aclrtStream stream),                                                      \
    (sendRecvInfo, itemNum, comm, stream))                                     \
  X(HcclResult, HcclAlltoAll,                                                  \
    (const void* sendBuf, uint64_t sendCount, HcclDataType sendType,           \
     const void* recvBuf, uint64_t recvCount, HcclDataType recvType,           \
     HcclComm comm, aclrtStream stream),                                       \
    (sendBuf, sendCount, sendType, recvBuf, recvCount, recvType, comm, stream)) \
  /* The counts and displacements are host arrays of one uint64_t per rank. */ \
  X(HcclResult, HcclAlltoAllV,                                                 \
    (const void* sendBuf, const void* sendCounts, const void* sdispls,         \
     HcclDataType sendType, const void* recvBuf, const void* recvCounts,       \
     const void* rdispls, HcclDataType recvType, HcclComm comm,                \
     aclrtStream stream),                                                      \
    (sendBuf, sendCounts, sdispls, sendType, recvBuf, recvCounts, rdispls,     \
     recvType, comm, stream))

#ifdef __cplusplus
extern "C" {
#endif

#define TORCH_NPU_DECLARE_HCCL_FUNCTION(ret, name, params, args) ret name params;
TORCH_NPU_HCCL_FUNCTIONS(TORCH_NPU_DECLARE_HCCL_FUNCTION)
#undef TORCH_NPU_DECLARE_HCCL_FUNCTION

#ifdef __cplusplus
} // extern "C"
#endif
