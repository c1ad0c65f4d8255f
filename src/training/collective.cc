#include "collective.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#if defined(TANDEM_WITH_CUDA)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <torch/torch.h>
#include "torch_version.h"

#include "tandem/common/error.h"

namespace tandem::training {

// LibTorch 2.x's Gloo and NCCL process groups derive from c10d::Backend; 1.13's from
// c10d::ProcessGroup. Both offer the collectives used here.
#if TANDEM_TORCH_AT_LEAST(2, 0)
using ProcessGroupBase = c10d::Backend;
#else
using ProcessGroupBase = c10d::ProcessGroup;
#endif

struct Collective::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<ProcessGroupBase> pg;
  std::function<c10::intrusive_ptr<c10d::Work>(std::vector<torch::Tensor>&, const c10d::AllreduceOptions&)> allreduce;
  std::function<void()> shutdown;  // NCCL: tear the communicators down in order, not in a destructor
};

namespace {

std::chrono::milliseconds ms(double seconds) { return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)); }

c10::intrusive_ptr<c10d::Store> connect_store(const DistInfo& d, bool libuv) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(d.master_port);
  o.isServer = d.rank == 0 && !d.agent_store;
  o.numWorkers = d.world;
  o.waitWorkers = true;
  o.timeout = ms(d.timeout_s);
#if TANDEM_TORCH_AT_LEAST(2, 2)
  o.useLibUV = libuv;
#else
  (void)libuv;
#endif
  return c10::make_intrusive<c10d::TCPStore>(d.master_addr, o);
}

c10::intrusive_ptr<c10d::Store> rendezvous(const DistInfo& d) {
  c10::intrusive_ptr<c10d::Store> store;
  try {
    // LibTorch 2.x prefers the libuv store; builds without libuv (Debian's) refuse it.
    store = connect_store(d, true);
  } catch (const std::exception& e) {
    if (std::string(e.what()).find("libuv") == std::string::npos) throw;
    store = connect_store(d, false);
  }
  if (d.agent_store) {
    store = c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + std::to_string(d.restart_count), store);
  }
  return c10::make_intrusive<c10d::PrefixStore>("tandem", store);
}

bool is_timeout(const std::exception& e) {
  const std::string what = e.what();
  return what.find("imeout") != std::string::npos || what.find("imed out") != std::string::npos;
}

// Meeting the other ranks failed: at the store (a client finds no server) or while the
// process group exchanges addresses through it (the server's peers never come). One
// error for both, naming where and the fix, in place of c10d's "Socket Timeout".
[[noreturn]] void could_not_meet(const DistInfo& d, const std::exception& e) {
  const std::string where = d.master_addr + ":" + std::to_string(d.master_port);
  const std::string what = e.what();
  const bool timed_out = is_timeout(e);
  throw NetworkError("rank " + std::to_string(d.rank) + " could not meet the others at " + where +
                     (timed_out ? " within " + std::to_string(static_cast<int>(d.timeout_s)) + " s" : "") + " (" +
                     what.substr(0, what.find('\n')) + "): check that every trainer host runs and reaches it" +
                     (timed_out ? ", or raise --dist-timeout" : ", and that --master-port is free"));
}

}  // namespace

Collective::Collective(const DistInfo& dist, torch::Device device)
    : dist_(dist), device_(device), impl_(std::make_unique<Impl>()) {
  if (dist.world <= 1 && !dist.single_rank_group) return;
  try {
    impl_->store = rendezvous(dist);
  } catch (const std::exception& e) {
    could_not_meet(dist, e);
  }
  try {
    make_group(dist);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    if (is_timeout(e)) could_not_meet(dist, e);  // the store's server: its peers never came
    throw;  // anything else (a bad TANDEM_GLOO_ADDRESS, NCCL) as it is
  }
}

void Collective::make_group(const DistInfo& dist) {
#if defined(TANDEM_WITH_CUDA)
  if (device_.is_cuda()) {
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = ms(dist.timeout_s);
    auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl_->store, dist.rank, dist.world, opts);
    impl_->allreduce = [nccl](std::vector<torch::Tensor>& t, const c10d::AllreduceOptions& o) { return nccl->allreduce(t, o); };
    impl_->pg = nccl;
#if TANDEM_TORCH_AT_LEAST(2, 4)
    impl_->shutdown = [nccl] { nccl->shutdown(); };
#endif
    return;
  }
#endif
  auto opts = c10d::ProcessGroupGloo::Options::create(ms(dist.timeout_s));
  opts->devices.push_back(dist.gloo_address.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                                                    : c10d::ProcessGroupGloo::createDeviceForHostname(dist.gloo_address));
  auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, dist.rank, dist.world, opts);
  impl_->allreduce = [gloo](std::vector<torch::Tensor>& t, const c10d::AllreduceOptions& o) { return gloo->allreduce(t, o); };
  impl_->pg = gloo;
}

bool Collective::grouped() const { return impl_->pg != nullptr; }

Collective::~Collective() {
  if (!impl_->shutdown) return;
  try {
    impl_->shutdown();
  } catch (const std::exception&) {
    // Leaving anyway: the process group's own destructor aborts what is left.
  }
}

void Collective::broadcast(std::vector<torch::Tensor> tensors, int root) {
  if (!grouped() || tensors.empty()) return;
  c10d::BroadcastOptions o;
  o.rootRank = root;
  for (auto& t : tensors) {
    std::vector<torch::Tensor> one = {t};
    impl_->pg->broadcast(one, o)->wait();
  }
}

c10::intrusive_ptr<c10d::Work> Collective::allreduce_async(torch::Tensor& t) {
  std::vector<torch::Tensor> one = {t};
  return impl_->allreduce(one, c10d::AllreduceOptions());
}

// NCCL takes only device tensors: the flag lives on this rank's device.
bool Collective::any(bool flag) {
  if (!grouped()) return flag;
  std::vector<torch::Tensor> t = {torch::full({1}, flag ? 1.0f : 0.0f, torch::TensorOptions(device_))};
  c10d::AllreduceOptions o;
  o.reduceOp = c10d::ReduceOp::MAX;
  impl_->allreduce(t, o)->wait();
  return t[0].item<float>() > 0;
}

std::vector<int64_t> Collective::sum(const std::vector<int64_t>& values) {
  if (!grouped() || values.empty()) return values;
  std::vector<torch::Tensor> t = {torch::tensor(values, torch::kInt64).to(device_)};
  impl_->allreduce(t, c10d::AllreduceOptions())->wait();
  const torch::Tensor host = t[0].cpu();
  return std::vector<int64_t>(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel());
}
void Collective::barrier() {
  if (!grouped()) return;
  c10d::BarrierOptions o;
  // NCCL would otherwise guess this rank's GPU from its rank number.
  if (device_.is_cuda()) o.device_ids = {device_.index()};
  impl_->pg->barrier(o)->wait();
}

void Collective::put(const std::string& key, const std::string& value) {
  if (grouped()) impl_->store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

std::string Collective::take(const std::string& key) {
  if (!grouped()) return {};
  const std::vector<uint8_t> v = impl_->store->get(key);
  return std::string(v.begin(), v.end());
}

}  // namespace tandem::training
