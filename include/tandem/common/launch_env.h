// The environment `tandem launch` gives each process of a user's command (and each
// `tandem trainer` rank) on a trainer host: the one definition of the variable names.
// docs/python.md has the same table for users. Readers: the ranks' own code
// (`tandem.Feed()` with no arguments, torch.distributed's env:// rendezvous); writer:
// launch::rank_environment (include/tandem/launch/rank_env.h).
//
// | variable            | value                                                            |
// |---------------------|------------------------------------------------------------------|
// | RANK                | GROUP_RANK x LOCAL_WORLD_SIZE + LOCAL_RANK                       |
// | LOCAL_RANK          | 0 .. LOCAL_WORLD_SIZE-1 on this host (the GPU to use)            |
// | WORLD_SIZE          | trainer hosts x LOCAL_WORLD_SIZE                                  |
// | LOCAL_WORLD_SIZE    | processes on this host (--procs-per-host; default its GPUs, 1)   |
// | GROUP_RANK          | this host's index among the trainer hosts (sorted by name)       |
// | GROUP_WORLD_SIZE    | trainer hosts                                                    |
// | ROLE_RANK, ROLE_WORLD_SIZE | RANK, WORLD_SIZE (torchrun's, one role)                   |
// | MASTER_ADDR         | the first trainer host's address (rank 0 runs there)             |
// | MASTER_PORT         | --master-port (29500; simulate: a free port), the same everywhere |
// | OMP_NUM_THREADS     | when unset: this host's cores / LOCAL_WORLD_SIZE (at least 1)     |
// | GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME | when unset: the interface resourceconfig.json names |
// | USE_LIBUV           | when unset: 0 (Debian's PyTorch has no libuv TCPStore)            |
// | TANDEM_WORKERS      | the job's data workers, "address:port,..." ("" = none)            |
// | TANDEM_TOKEN        | the job's token (only when there is one)                         |
// | TANDEM_JOB_NAME     | the job name workers check ("" = none)                           |
// | TANDEM_SETTINGS     | JSON object: the tandem settings the launcher was given, by name  |
// | TANDEM_SAGEMAKER_ROOT | this host's SageMaker root (rank 0's output/ goes under it)     |
// | TANDEM_HOST         | this host's name (algo-2)                                        |
// | TANDEM_HOST_TYPES   | every host's instance type, "host=type,...": a rank's summary    |
// |                     | prices its plan with them, discovering nothing again             |
// | TANDEM_RANK_GROUP   | 1: tandem's rank group started this rank; it releases the workers |
// |                     | and writes output/failure when the ranks have ended               |
//
// No TORCHELASTIC_* variable is set: the ranks rendezvous at MASTER_ADDR:MASTER_PORT,
// rank 0 serving the store, as torch.distributed's env:// does by default.
#pragma once

namespace tandem::launch_env {

// torchrun's (torch.distributed.run) variables.
inline constexpr const char* kRank = "RANK";
inline constexpr const char* kLocalRank = "LOCAL_RANK";
inline constexpr const char* kWorldSize = "WORLD_SIZE";
inline constexpr const char* kLocalWorldSize = "LOCAL_WORLD_SIZE";
inline constexpr const char* kGroupRank = "GROUP_RANK";
inline constexpr const char* kGroupWorldSize = "GROUP_WORLD_SIZE";
inline constexpr const char* kRoleRank = "ROLE_RANK";
inline constexpr const char* kRoleWorldSize = "ROLE_WORLD_SIZE";
inline constexpr const char* kMasterAddr = "MASTER_ADDR";
inline constexpr const char* kMasterPort = "MASTER_PORT";
inline constexpr const char* kOmpThreads = "OMP_NUM_THREADS";
// The network interface torch.distributed's Gloo and NCCL use.
inline constexpr const char* kGlooInterface = "GLOO_SOCKET_IFNAME";
inline constexpr const char* kNcclInterface = "NCCL_SOCKET_IFNAME";
// torch.distributed's TCPStore without libuv, which Debian's PyTorch lacks.
inline constexpr const char* kUseLibuv = "USE_LIBUV";

// tandem's own.
inline constexpr const char* kWorkers = "TANDEM_WORKERS";
inline constexpr const char* kToken = "TANDEM_TOKEN";
inline constexpr const char* kJobName = "TANDEM_JOB_NAME";
inline constexpr const char* kSettings = "TANDEM_SETTINGS";
inline constexpr const char* kSageMakerRoot = "TANDEM_SAGEMAKER_ROOT";
inline constexpr const char* kHost = "TANDEM_HOST";
inline constexpr const char* kHostTypes = "TANDEM_HOST_TYPES";
// "1" for a rank of tandem's rank group (rank_group.h), which releases the data workers
// and writes output/failure: tandem's own trainer then leaves both to it.
inline constexpr const char* kRankGroup = "TANDEM_RANK_GROUP";
// For `tandem trainer` ranks only: the address Gloo binds to.
inline constexpr const char* kGlooAddress = "TANDEM_GLOO_ADDRESS";
inline constexpr const char* kStreamRelay = "TANDEM_STREAM_RELAY";
// Set by `tandem simulate --job` for torchrun-style ranks (each under its own /bin/sh):
// which launch of a host's ranks a rank belongs to (feed/script_run.h ranks_training).
inline constexpr const char* kLaunchId = "TANDEM_LAUNCH_ID";

}  // namespace tandem::launch_env
