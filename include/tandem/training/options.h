// The training loop's and its feeding's flags (TrainerOptions), as the command line
// fills them (launch/settings.h); training::TrainerConfig derives each component's own
// options from them (trainer_options.h). See docs/configuration.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem {

// The training loop and its feeding.
struct TrainerOptions {
  // Data workers named directly rather than by an instance group (torchrun, Kubeflow,
  // `tandem trainer`): --workers host[:port],... and --worker-service NAME[:PORT] (or
  // --workers dns:NAME[:PORT]), a DNS name with one address per worker (a Kubernetes
  // headless Service), re-resolved while the run goes; --workers-watch FILE, a file of
  // host:port lines re-read when it changes (worker_directory.h).
  std::vector<std::string> workers;
  std::string worker_service;
  std::string workers_watch;
  std::string model = "small_cnn";   // --model: small_cnn | mnist_cnn | resnet18 | resnet50 | vit_tiny | vit_b16 | FILE.pt
  int batch_size = 64;               // --batch-size: per trainer process
  int64_t steps = 300;               // --steps
  int64_t epochs = 0;                // --epochs: instead of --steps, passes over the dataset; 0 = use --steps
  std::string optimizer = "sgd";     // --optimizer: sgd (momentum) | adam | adamw
  double lr = 0.05;                  // --lr: peak learning rate
  double momentum = 0.9;             // --momentum (sgd)
  double weight_decay = 0;           // --weight-decay
  int64_t warmup_steps = 0;          // --warmup-steps: linear warmup, then cosine decay to 0
  std::string schedule = "constant"; // --lr-schedule: constant | cosine
  double clip_grad_norm = 0;         // --clip-grad-norm: 0 = off
  std::string amp = "none";          // --amp: none | bf16 (autocast on CUDA and CPU)
  // Batch-level mixing and label smoothing (torchvision's classification reference), on
  // the trainer's device, for classification (image + label) models: 0 = off.
  double mixup = 0;                  // --mixup ALPHA: lambda ~ Beta(ALPHA, ALPHA)
  double cutmix = 0;                 // --cutmix ALPHA (with --mixup, one of the two per batch)
  double label_smoothing = 0;        // --label-smoothing EPS: targets (1-EPS) onehot + EPS/classes
  bool channels_last = false;        // --channels-last
  int procs_per_host = 0;            // --procs-per-host: trainer processes per host; 0 = GPUs (1 on CPU)
  // --allow-cpu-training: let a host of a GPU instance family (ml.p*, ml.g*) train on its
  // CPU when this tandem has no CUDA or sees no GPU; without it that is an error.
  bool allow_cpu_training = false;
  // --grad-sync: overlap (allreduce each gradient bucket as soon as backward fills it) |
  // after-backward (the same buckets, all sent once backward has finished).
  std::string grad_sync = "overlap";
  // --fused-optimizer / --no-fused-optimizer: one fused kernel per optimizer step where
  // LibTorch has them (2.6 and later), the per-parameter C++ optimizers otherwise.
  bool fused_optimizer = true;
  int master_port = 29500;           // --master-port: c10d TCPStore on the first trainer host
  double dist_timeout_s = 300;       // --dist-timeout: rendezvous and collective deadline
  // --single-rank-group: form the process group and allreduce gradients with one rank
  // too (NCCL on a one-GPU machine; a world of 1 otherwise skips both)
  bool single_rank_group = false;
  int64_t checkpoint_every = 0;      // --checkpoint-every: steps between checkpoints; 0 = only on SIGTERM; -1 = auto
  int keep_checkpoints = 3;          // --keep-checkpoints: the newest K are kept
  bool resume_any = false;           // --resume-any: resume a checkpoint of another model, optimizer or dataset
  // --eval-data: a held-out set (same forms as --data, read with --split test); the
  // trainer reports its top-1 accuracy every --eval-every steps (0 = at the end only).
  std::string eval_data;
  int64_t eval_every = 0;
  int log_every = 20;                // --log-every
  // --emulate-step-ms: simulations only; each training step (or a script's, between two
  // batches of tandem.Feed) takes at least this long, sleeping the rest (pad_step).
  double emulate_step_ms = 0;
  int local_workers = -1;            // --local-workers: in-process preprocessing threads; -1 = spare cores
  int train_threads = 0;             // --train-threads: LibTorch intra-op threads; 0 = auto
  int inflight = 4;                  // --inflight: requests outstanding per worker
  int prefetch = 16;                 // --prefetch: batches requested ahead of the loop
  double connect_timeout_s = 180;    // --connect-timeout: waiting for workers to come up
  double batch_timeout_s = 120;      // --batch-timeout: longest wait for one batch
  std::string summary_json;          // --summary-json: default <root>/output/data/summary.json
  // --audit-samples: record which samples each batch was made from and report, per
  // epoch, missing, duplicated and unplanned samples in the summary (sample_audit).
  bool audit_samples = false;
};

}  // namespace tandem
