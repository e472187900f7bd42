#include "executor/agent/device_filter.h"

#include <fcntl.h>
#include <linux/bpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace jc::nexec {
namespace {

bpf_insn Insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  bpf_insn i{};
  i.code = code;
  i.dst_reg = dst;
  i.src_reg = src;
  i.off = off;
  i.imm = imm;
  return i;
}

long Bpf(int cmd, bpf_attr* attr) { return syscall(__NR_bpf, cmd, attr, sizeof(*attr)); }

absl::Status Attach(int cmd, const std::string& cgroup_dir, int program_fd) {
  const int dir = open(cgroup_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return absl::UnavailableError(absl::StrCat("cannot open ", cgroup_dir, ": ", std::strerror(errno)));
  bpf_attr attr{};
  attr.target_fd = static_cast<uint32_t>(dir);
  attr.attach_bpf_fd = static_cast<uint32_t>(program_fd);
  attr.attach_type = BPF_CGROUP_DEVICE;
  if (cmd == BPF_PROG_ATTACH) attr.attach_flags = BPF_F_ALLOW_MULTI;
  const long r = Bpf(cmd, &attr);
  const int err = errno;
  close(dir);
  if (r != 0) {
    return absl::UnavailableError(absl::StrCat(cmd == BPF_PROG_ATTACH ? "cannot attach" : "cannot detach",
                                               " the device filter of ", cgroup_dir, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int> LoadDeviceFilter(const std::vector<CharDevice>& denied) {
  // The context is struct bpf_cgroup_dev_ctx { u32 access_type; u32 major; u32 minor; }:
  // the device's type is the low 16 bits of access_type. Returning 0 denies.
  std::vector<bpf_insn> prog = {
      Insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_2, BPF_REG_1, 0, 0),  // r2 = access_type
      Insn(BPF_ALU | BPF_AND | BPF_K, BPF_REG_2, 0, 0, 0xffff),     // r2 = type
      Insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_3, BPF_REG_1, 4, 0),  // r3 = major
      Insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_4, BPF_REG_1, 8, 0),  // r4 = minor
  };
  for (const CharDevice& d : denied) {
    // Not this device: on to the next block of five.
    prog.push_back(Insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_2, 0, 4, BPF_DEVCG_DEV_CHAR));
    prog.push_back(Insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_3, 0, 3, static_cast<int32_t>(d.major)));
    prog.push_back(Insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_4, 0, 2, static_cast<int32_t>(d.minor)));
    prog.push_back(Insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0));  // denied
    prog.push_back(Insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
  }
  prog.push_back(Insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1));  // allowed
  prog.push_back(Insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));

  static const char kLicense[] = "GPL";
  auto load = [&](char* log, uint32_t log_size) {
    bpf_attr attr{};
    attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
    attr.insns = reinterpret_cast<uint64_t>(prog.data());
    attr.insn_cnt = static_cast<uint32_t>(prog.size());
    attr.license = reinterpret_cast<uint64_t>(kLicense);
    if (log != nullptr) {
      attr.log_buf = reinterpret_cast<uint64_t>(log);
      attr.log_size = log_size;
      attr.log_level = 1;
    }
    return Bpf(BPF_PROG_LOAD, &attr);
  };
  long fd = load(nullptr, 0);
  if (fd < 0) {
    const int err = errno;
    std::string log(1 << 16, '\0');  // loaded again only to say why
    (void)load(log.data(), static_cast<uint32_t>(log.size()));
    log.resize(std::strlen(log.c_str()));
    return absl::UnavailableError(absl::StrCat("cannot load the device filter (BPF): ", std::strerror(err),
                                               log.empty() ? "" : absl::StrCat("; verifier: ", log)));
  }
  fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
  return static_cast<int>(fd);
}

absl::Status AttachDeviceFilter(const std::string& cgroup_dir, int program_fd) {
  return Attach(BPF_PROG_ATTACH, cgroup_dir, program_fd);
}

absl::Status DetachDeviceFilter(const std::string& cgroup_dir, int program_fd) {
  return Attach(BPF_PROG_DETACH, cgroup_dir, program_fd);
}

}  // namespace jc::nexec
