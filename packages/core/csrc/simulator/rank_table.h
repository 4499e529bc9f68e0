// HCCL rank tables (RANK_TABLE_FILE, HcclCommInitClusterInfo): which device
// of which server each rank of a job is, as a JSON file. The simulator reads
// the fields it needs, with an error naming the file, the place and what is
// wrong for anything else.
//
//   {"version": "1.0", "status": "completed", "server_count": "1",
//    "server_list": [{"server_id": "10.0.0.1",
//                     "device": [{"device_id": "0", "device_ip": "...", "rank_id": "0"}, ...]}]}
//
// Numbers may be written as JSON strings (as CANN's tools write them) or as
// numbers. Versions 1.0 and 1.2 (which adds super_pod_list, not read here)
// have this layout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace npu_sim {

struct RankTable {
  struct Rank {
    uint32_t rank_id = 0;
    uint32_t device_id = 0;
    std::string server_id;
  };
  std::vector<Rank> ranks;    // by rank_id: ranks[r].rank_id == r
  std::vector<std::string> servers;
  std::string content;        // the file's bytes (what identifies the job's table)
};

// Reads and checks the rank table at `path`: "completed" status, rank ids 0..n-1
// each once, at most one entry per (server, device). False with `why` set
// otherwise.
bool readRankTable(const char* path, RankTable* out, std::string* why);

} // namespace npu_sim
