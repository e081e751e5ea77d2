#include "core/mmap_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace inflight {

std::shared_ptr<MmapFile> MmapFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  INFLIGHT_CHECK_CODE(fd >= 0, errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInvalidFile,
                      "cannot open '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    INFLIGHT_THROW(ErrorCode::kInvalidFile, "'{}' is not a regular file", path);
  }
  std::shared_ptr<MmapFile> f(new MmapFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);
    INFLIGHT_CHECK_CODE(p != MAP_FAILED, ErrorCode::kInvalidFile, "cannot map '{}': {}", path,
                        std::strerror(err));
    f->data_ = static_cast<const uint8_t*>(p);
  } else {
    ::close(fd);
  }
  return f;
}

MmapFile::~MmapFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace inflight
