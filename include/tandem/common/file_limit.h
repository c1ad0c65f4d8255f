// Open files. A data worker holds a socket per trainer stream and per metrics scrape, a
// trainer one per worker and rank, each Python process a few; the soft limit many
// systems start a shell with (1,024) is below what a large job holds, and at the limit a
// server's accept() fails on every wakeup (the metrics server's loop then spins).
#pragma once

namespace tandem {

// Raises this process's soft RLIMIT_NOFILE to its hard limit (as systemd does for its
// services and Go does at start). Once, early in main; a library leaves it alone.
void raise_file_limit();

}  // namespace tandem
