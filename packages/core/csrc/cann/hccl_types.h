// Declarations of the HCCL (collective communication) types and enums that
// torch-npu uses. Written for this project from the values published in
// CANN's public header hccl_types.h; every value here must match CANN's,
// because the same code runs against the real libhccl.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  HCCL_SUCCESS = 0,
  HCCL_E_PARA = 1,
  HCCL_E_PTR = 2,
  HCCL_E_MEMORY = 3,
  HCCL_E_INTERNAL = 4,
  HCCL_E_NOT_SUPPORT = 5,
  HCCL_E_NOT_FOUND = 6,
  HCCL_E_UNAVAIL = 7,
  HCCL_E_SYSCALL = 8,
  HCCL_E_TIMEOUT = 9,
  HCCL_E_OPEN_FILE_FAILURE = 10,
  HCCL_E_TCP_CONNECT = 11,
  HCCL_E_ROCE_CONNECT = 12,
  HCCL_E_TCP_TRANSFER = 13,
  HCCL_E_ROCE_TRANSFER = 14,
  HCCL_E_RUNTIME = 15,
  HCCL_E_DRV = 16,
  HCCL_E_PROFILING = 17,
  HCCL_E_CCE = 18,
  HCCL_E_NETWORK = 19,
  HCCL_E_AGAIN = 20,
  HCCL_E_REMOTE = 21,
  HCCL_E_SUSPENDING = 22,
  HCCL_E_OPRETRY_FAIL = 23,
  HCCL_E_OOM = 24,
} HcclResult;

typedef void* HcclComm;

typedef enum {
  HCCL_REDUCE_SUM = 0,
  HCCL_REDUCE_PROD = 1,
  HCCL_REDUCE_MAX = 2,
  HCCL_REDUCE_MIN = 3,
  HCCL_REDUCE_RESERVED = 255,
} HcclReduceOp;

typedef enum {
  HCCL_DATA_TYPE_INT8 = 0,
  HCCL_DATA_TYPE_INT16 = 1,
  HCCL_DATA_TYPE_INT32 = 2,
  HCCL_DATA_TYPE_FP16 = 3,
  HCCL_DATA_TYPE_FP32 = 4,
  HCCL_DATA_TYPE_INT64 = 5,
  HCCL_DATA_TYPE_UINT64 = 6,
  HCCL_DATA_TYPE_UINT8 = 7,
  HCCL_DATA_TYPE_UINT16 = 8,
  HCCL_DATA_TYPE_UINT32 = 9,
  HCCL_DATA_TYPE_FP64 = 10,
  HCCL_DATA_TYPE_BFP16 = 11,
  HCCL_DATA_TYPE_INT128 = 12,
  HCCL_DATA_TYPE_RESERVED = 255,
} HcclDataType;

// One message of HcclBatchSendRecv: a send to, or a receive from, remoteRank.
typedef enum {
  HCCL_SEND = 0,
  HCCL_RECV = 1,
  HCCL_SEND_RECV_RESERVED,
} HcclSendRecvType;

typedef struct HcclSendRecvItemDef {
  HcclSendRecvType sendRecvType;
  void* buf;
  uint64_t count;
  HcclDataType dataType;
  uint32_t remoteRank;
} HcclSendRecvItem;

// The root's address that every rank passes to HcclCommInitRootInfo; the
// launcher moves it between processes (torch-npu: through the c10d store).
#define HCCL_ROOT_INFO_BYTES 4108
typedef struct HcclRootInfoDef {
  char internal[HCCL_ROOT_INFO_BYTES];
} HcclRootInfo;

// A communicator's configuration for HcclCommInitRootInfoConfig. The first
// bytes are a header (the struct's size, a magic word and a version) that
// lets a library read only the fields it knows; fill it, and mark every
// field not set, with c10_npu::hccl::default_comm_config() (HCCL's own
// header does it with an inline HcclCommConfigInit). A field that is set takes
// precedence over the matching environment variable (hcclBufferSize over
// HCCL_BUFFSIZE, hcclExecTimeOut over HCCL_EXEC_TIMEOUT).
#define HCCL_COMM_CONFIG_INFO_BYTES 24
#define HCCL_COMM_CONFIG_MAGIC_WORD 0xf0f0f0f0u
#define HCCL_COMM_CONFIG_VERSION 10
#define HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET 0xffffffffu
#define HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET 0xffffffffu
#define HCCL_COMM_TRAFFIC_CLASS_CONFIG_NOT_SET 0xffffffffu
#define HCCL_COMM_SERVICE_LEVEL_CONFIG_NOT_SET 0xffffffffu
#define HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET (-1)
#define HCCL_COMM_QOS_CONFIG_NOT_SET 0xffffffffu
#define HCCL_COMM_NAME_MAX_LENGTH 128
#define HCCL_COMM_UDI_MAX_LENGTH 128
#define HCCL_COMM_ALGO_MAX_LENGTH 1600
#define HCCL_COMM_RETRY_ENABLE_MAX_LENGTH 50
#define HCCL_COMM_RETRY_PARAMS_MAX_LENGTH 128
#define HCCL_COMM_BUFFER_NAME_MAX_LENGTH 128

typedef struct HcclCommConfigDef {
  char reserved[HCCL_COMM_CONFIG_INFO_BYTES]; // size_t size, uint32_t magic, version, uint64_t 0
  uint32_t hcclBufferSize;                    // MiB
  uint32_t hcclDeterministic;
  char hcclCommName[HCCL_COMM_NAME_MAX_LENGTH];
  char hcclUdi[HCCL_COMM_UDI_MAX_LENGTH];
  uint32_t hcclOpExpansionMode;
  uint32_t hcclRdmaTrafficClass;
  uint32_t hcclRdmaServiceLevel;
  uint32_t hcclWorldRankID;
  uint64_t hcclJobID;
  uint8_t aclGraphZeroCopyEnable;
  int32_t hcclExecTimeOut; // seconds; 0: no limit
  char hcclAlgo[HCCL_COMM_ALGO_MAX_LENGTH];
  char hcclRetryEnable[HCCL_COMM_RETRY_ENABLE_MAX_LENGTH];
  char hcclRetryParams[HCCL_COMM_RETRY_PARAMS_MAX_LENGTH];
  char hcclBufferName[HCCL_COMM_BUFFER_NAME_MAX_LENGTH];
  uint32_t hcclQos;
  uint64_t hcclSymWinMaxMemSizePerRank; // GiB
} HcclCommConfig;

// The header at the start of HcclCommConfig::reserved.
typedef struct HcclCommConfigHeaderDef {
  size_t size; // sizeof(HcclCommConfig) of the caller
  uint32_t magicWord;
  uint32_t version;
  uint64_t reserved;
} HcclCommConfigHeader;

#ifdef __cplusplus
} // extern "C"
#endif
