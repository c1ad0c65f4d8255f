#include <cstdlib>
#include <string>

#include "tandem/common/error.h"
#include "tandem/training/trainer.h"

namespace tandem::training {
namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  try {
    size_t used = 0;
    const int n = std::stoi(v, &used);
    if (used == std::string(v).size()) return n;
  } catch (const std::exception&) {
  }
  throw ConfigError(std::string("environment variable ") + name + "='" + v + "' is not an integer");
}

}  // namespace

DistInfo dist_from_env(const TrainerOptions& opts) {
  DistInfo d;
  d.world = env_int("WORLD_SIZE", 1);
  d.rank = env_int("RANK", 0);
  d.local_rank = env_int("LOCAL_RANK", 0);
  d.local_world = env_int("LOCAL_WORLD_SIZE", 1);
  d.master_port = env_int("MASTER_PORT", opts.master_port);
  d.timeout_s = opts.dist_timeout_s;
  if (const char* addr = std::getenv("MASTER_ADDR"); addr && *addr) d.master_addr = addr;
  if (const char* addr = std::getenv("TANDEM_GLOO_ADDRESS"); addr && *addr) d.gloo_address = addr;
  if (const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE"); agent && std::string(agent) == "True") {
    d.agent_store = true;
    d.restart_count = env_int("TORCHELASTIC_RESTART_COUNT", 0);
  }
  if (d.world < 1 || d.rank < 0 || d.rank >= d.world) {
    throw ConfigError("RANK=" + std::to_string(d.rank) + " does not fit WORLD_SIZE=" + std::to_string(d.world) +
                      ": RANK must be in [0, WORLD_SIZE)");
  }
  if (d.local_world < 1 || d.local_rank < 0 || d.local_rank >= d.local_world || d.local_world > d.world) {
    throw ConfigError("LOCAL_RANK=" + std::to_string(d.local_rank) + " / LOCAL_WORLD_SIZE=" +
                      std::to_string(d.local_world) + " do not fit WORLD_SIZE=" + std::to_string(d.world));
  }
  return d;
}

}  // namespace tandem::training
