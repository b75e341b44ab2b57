//! The double mapping of DESIGN §4: one memfd mapped twice, `MAP_SHARED`.
//!
//! View A goes to the driver (imported with `VkImportMemoryHostPointerInfoEXT`, so it is aligned
//! to `minImportedHostPointerAlignment` and its length is a multiple of it); view B goes to the
//! application from `vkMapMemory` and is the one the guard protects. Both views show the same
//! bytes; protecting B leaves A alone, so lavapipe's CPU "GPU" threads (which use A) never fault.
//!
//! Both views run on past their length by [`SLACK`] bytes of the same memfd: drivers read past
//! the end of a buffer (SwiftShader's vertex fetch loads 16 bytes for a 4-byte attribute of the
//! last vertex, issue 44), which their own allocations absorb; an imported range that ended on
//! the last mapped page would turn that read into a SIGSEGV in a driver thread.
//!
//! Note: a `MAP_SHARED` mapping stays shared with a `fork()`ed child (an anonymous driver
//! mapping would usually be too); fine for profiling.

use std::ffi::c_void;
use std::io;

/// Bytes each view is mapped past its length (not imported, not handed to the application): what
/// a driver's or an application's over-read of the last bytes lands on.
pub const SLACK: usize = 64 << 10;

/// Two views of one memfd. Dropping it unmaps both views and closes the fd.
pub struct DoubleMap {
    fd: libc::c_int,
    a: *mut u8,
    b: *mut u8,
    len: usize,
}

// The views are plain memory; the struct only owns them.
unsafe impl Send for DoubleMap {}
unsafe impl Sync for DoubleMap {}

fn page_size() -> usize {
    (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(4096) as usize
}

fn err(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

impl DoubleMap {
    /// `size` bytes (rounded up to a multiple of `max(align, page)`), view A aligned to
    /// `align` (a power of two; anything at or below the page size is satisfied by mmap).
    pub fn new(size: usize, align: usize) -> io::Result<DoubleMap> {
        let ps = page_size();
        let align = align.max(ps);
        if !align.is_power_of_two() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("alignment {align} is not a power of two"),
            ));
        }
        let len = size
            .max(1)
            .checked_add(align - 1)
            .map(|v| v & !(align - 1))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "size overflows"))?;
        // SYS_memfd_create rather than the libc wrapper: glibc gained it only in 2.27.
        let name = b"vk-echo\0";
        let fd = unsafe {
            libc::syscall(
                libc::SYS_memfd_create,
                name.as_ptr(),
                libc::MFD_CLOEXEC as libc::c_uint,
            )
        } as libc::c_int;
        if fd < 0 {
            return Err(err("memfd_create"));
        }
        let mut m = DoubleMap {
            fd,
            a: std::ptr::null_mut(),
            b: std::ptr::null_mut(),
            len,
        };
        let mapped = len + SLACK;
        if unsafe { libc::ftruncate(fd, mapped as libc::off_t) } != 0 {
            return Err(err("ftruncate"));
        }
        m.a = map_aligned(fd, mapped, align, "view A")?;
        // View B at 2 MiB when it spans that much: the guard parks its page tables a
        // page-table page at a time (profile/watch/park.rs).
        let huge = 2 << 20;
        let b = map_aligned(fd, mapped, if len >= huge { huge } else { ps }, "view B")?;
        m.b = b;
        Ok(m)
    }

    /// Two views of an allocation the driver exported as a file descriptor (`fd`, taken over:
    /// closed on drop), `size` bytes: view A for echo's own accesses (the handler's emulation),
    /// view B for the application. The driver keeps its own mapping of the same file. Past the
    /// file's end each view runs on by [`SLACK`] bytes of anonymous memory (an over-read there
    /// reads zeros instead of raising SIGBUS).
    pub fn from_fd(fd: libc::c_int, size: usize) -> io::Result<DoubleMap> {
        let ps = page_size();
        let len = size.max(1).div_ceil(ps) * ps;
        let mut m = DoubleMap {
            fd,
            a: std::ptr::null_mut(),
            b: std::ptr::null_mut(),
            len,
        };
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return Err(err("fstat"));
        }
        // The file's last page, mapped whole, ends where the file's pages end.
        let file_pages = (st.st_size.max(0) as usize).div_ceil(ps) * ps;
        if file_pages < len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the exported file holds {} bytes, the allocation {size}",
                    st.st_size
                ),
            ));
        }
        let huge = 2 << 20;
        m.a = map_aligned(fd, len + SLACK, ps, "view A")?;
        m.b = map_aligned(
            fd,
            len + SLACK,
            if len >= huge { huge } else { ps },
            "view B",
        )?;
        for v in [m.a, m.b] {
            // Past the file's pages: anonymous memory instead of the file (SIGBUS there).
            let tail = (v as usize + file_pages.min(len + SLACK)) as *mut c_void;
            let n = len + SLACK - file_pages.min(len + SLACK);
            if n > 0 {
                let p = unsafe {
                    libc::mmap(
                        tail,
                        n,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                        -1,
                        0,
                    )
                };
                if p == libc::MAP_FAILED {
                    return Err(err("mmap (slack)"));
                }
            }
        }
        Ok(m)
    }

    /// View A: for the driver (import this one).
    pub fn driver_ptr(&self) -> *mut u8 {
        self.a
    }

    /// View B: for the application (protect this one).
    pub fn app_ptr(&self) -> *mut u8 {
        self.b
    }

    /// Length of each view (a multiple of the alignment asked for).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn fd(&self) -> libc::c_int {
        self.fd
    }
}

/// Map `fd` shared at an address aligned to `align` (over-reserve, then trim).
fn map_aligned(fd: libc::c_int, len: usize, align: usize, what: &str) -> io::Result<*mut u8> {
    let ps = page_size();
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    if align <= ps {
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, rw, libc::MAP_SHARED, fd, 0) };
        if p == libc::MAP_FAILED {
            return Err(err(&format!("mmap ({what})")));
        }
        return Ok(p as *mut u8);
    }
    let reserve = len + align;
    let r = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            reserve,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if r == libc::MAP_FAILED {
        return Err(err(&format!("mmap (reserve for {what})")));
    }
    let r = r as usize;
    let at = (r + align - 1) & !(align - 1);
    let p = unsafe {
        libc::mmap(
            at as *mut c_void,
            len,
            rw,
            libc::MAP_SHARED | libc::MAP_FIXED,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        let e = err(&format!("mmap ({what})"));
        unsafe { libc::munmap(r as *mut c_void, reserve) };
        return Err(e);
    }
    unsafe {
        if at > r {
            libc::munmap(r as *mut c_void, at - r);
        }
        let tail = at + len;
        if r + reserve > tail {
            libc::munmap(tail as *mut c_void, r + reserve - tail);
        }
    }
    Ok(at as *mut u8)
}

impl Drop for DoubleMap {
    fn drop(&mut self) {
        unsafe {
            if !self.a.is_null() {
                libc::munmap(self.a as *mut c_void, self.len + SLACK);
            }
            if !self.b.is_null() {
                libc::munmap(self.b as *mut c_void, self.len + SLACK);
            }
            libc::close(self.fd);
        }
    }
}

/// A patched `vkCreateBuffer`: `VkExternalMemoryBufferCreateInfo { HOST_ALLOCATION_EXT }` in
/// front of the application's chain — a buffer bound into imported (double-mapped) memory must
/// declare it (VUID-vkBindBufferMemory-memory-02727). Used by profile mode and guarded enforce.
pub struct BufferPatch {
    info: ash::vk::BufferCreateInfo<'static>,
    ext: ash::vk::ExternalMemoryBufferCreateInfo<'static>,
}

impl BufferPatch {
    /// `info` with the host-allocation handle type in front, unless the application chained its
    /// own external-memory info (its buffer then is not bound into echo's imports: such memory
    /// is external and is left alone).
    ///
    /// # Safety
    /// `info` must be a valid create info.
    pub unsafe fn host_allocation(
        info: &ash::vk::BufferCreateInfo<'_>,
    ) -> Option<Box<BufferPatch>> {
        Self::external(
            info,
            ash::vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT,
        )
    }

    /// `info` with `VkExternalMemoryBufferCreateInfo { handle }` in front (as
    /// [`BufferPatch::host_allocation`], for any handle type).
    ///
    /// # Safety
    /// `info` must be a valid create info.
    pub unsafe fn external(
        info: &ash::vk::BufferCreateInfo<'_>,
        handle: ash::vk::ExternalMemoryHandleTypeFlags,
    ) -> Option<Box<BufferPatch>> {
        use ash::vk;
        let mut p = info.p_next as *const vk::BaseInStructure<'_>;
        while !p.is_null() {
            if (*p).s_type == vk::StructureType::EXTERNAL_MEMORY_BUFFER_CREATE_INFO {
                return None;
            }
            p = (*p).p_next;
        }
        let mut b = Box::new(BufferPatch {
            info: std::mem::transmute::<vk::BufferCreateInfo<'_>, vk::BufferCreateInfo<'static>>(
                *info,
            ),
            ext: vk::ExternalMemoryBufferCreateInfo::default(),
        });
        b.ext.handle_types = handle;
        b.ext.p_next = info.p_next;
        b.info.p_next = &b.ext as *const _ as *const c_void;
        Some(b)
    }

    /// The create info to pass down (valid while `self` is not moved).
    pub fn info(&self) -> *const ash::vk::BufferCreateInfo<'static> {
        &self.info
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_share_bytes_and_are_aligned() {
        for &(size, align) in &[
            (1usize, 1usize),
            (5000, 4096),
            (100_000, 65536),
            (3 << 20, 1 << 21),
        ] {
            let m = DoubleMap::new(size, align).unwrap();
            let al = align.max(page_size());
            assert_eq!(m.driver_ptr() as usize % al, 0, "A aligned to {al}");
            assert_eq!(m.len() % al, 0);
            assert!(m.len() >= size);
            assert_ne!(m.driver_ptr(), m.app_ptr());
            unsafe {
                let (a, b) = (m.driver_ptr(), m.app_ptr());
                assert_eq!(*a, 0, "fresh memfd pages are zero");
                *b.add(m.len() - 1) = 0xab;
                assert_eq!(std::ptr::read_volatile(a.add(m.len() - 1)), 0xab);
                *a.add(7) = 0xcd;
                assert_eq!(std::ptr::read_volatile(b.add(7)), 0xcd);
            }
        }
        assert!(DoubleMap::new(10, 3 * 4096).is_err());
    }

    /// A read of up to [`SLACK`] bytes past either view's end stays on mapped memory (issue 44:
    /// SwiftShader's vertex fetch over-reads the last vertex by 12 bytes; with the imported range
    /// ending on an unmapped page, the profiled program died in a driver thread).
    #[test]
    fn reads_past_the_end_land_on_the_slack() {
        for &(size, align) in &[(4096usize, 4096usize), (1 << 20, 4096), (3 << 20, 1 << 21)] {
            let m = DoubleMap::new(size, align).unwrap();
            for v in [m.driver_ptr(), m.app_ptr()] {
                unsafe {
                    // The 16-byte load SwiftShader's JIT makes at the last 4 bytes.
                    let last = v.add(m.len() - 4);
                    let w = std::ptr::read_unaligned(last as *const u128);
                    assert_eq!(w, 0);
                    assert_eq!(std::ptr::read_volatile(v.add(m.len() + SLACK - 1)), 0);
                }
            }
        }
    }

    #[test]
    fn protecting_b_leaves_a_usable() {
        let m = DoubleMap::new(1 << 16, 4096).unwrap();
        unsafe {
            assert_eq!(
                libc::mprotect(m.app_ptr() as *mut c_void, m.len(), libc::PROT_NONE),
                0
            );
            // If A were affected, these would kill the test process.
            let a = m.driver_ptr();
            for i in (0..m.len()).step_by(4096) {
                std::ptr::write_volatile(a.add(i), 0x5a);
                assert_eq!(std::ptr::read_volatile(a.add(i)), 0x5a);
            }
            libc::mprotect(
                m.app_ptr() as *mut c_void,
                m.len(),
                libc::PROT_READ | libc::PROT_WRITE,
            );
            assert_eq!(std::ptr::read_volatile(m.app_ptr().add(4096)), 0x5a);
        }
    }

    #[test]
    fn drop_unmaps_and_closes() {
        // In a child process: other tests' threads would reuse the fd number or the address.
        if std::env::var_os("ECHO_MEMFD_CHILD").is_none() {
            // Through ECHO_TEST_RUNNER under an emulator (qemu-user cannot exec a foreign
            // binary); this file is also compiled into the test layer, so no crate helper.
            let exe = std::env::current_exe().unwrap();
            let runner = std::env::var("ECHO_TEST_RUNNER").unwrap_or_default();
            let mut words = runner.split_whitespace();
            let mut cmd = match words.next() {
                Some(program) => {
                    let mut c = std::process::Command::new(program);
                    c.args(words).arg(&exe);
                    c
                }
                None => std::process::Command::new(&exe),
            };
            let out = cmd
                .args([
                    "hostmem::memfd::tests::drop_unmaps_and_closes",
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("ECHO_MEMFD_CHILD", "1")
                .output()
                .unwrap();
            let so = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success() && so.contains("CHILD-OK"), "{out:?}");
            return;
        }
        let (fd, a, b) = {
            let m = DoubleMap::new(8192, 1 << 16).unwrap();
            (m.fd(), m.driver_ptr() as usize, m.app_ptr() as usize)
        };
        assert_eq!(unsafe { libc::fcntl(fd, libc::F_GETFD) }, -1, "fd closed");
        // mincore on an unmapped range fails with ENOMEM.
        let mut v = [0u8; 16];
        for p in [a, b] {
            let r = unsafe { libc::mincore(p as *mut c_void, 8192, v.as_mut_ptr()) };
            assert_eq!(r, -1, "{p:#x} still mapped");
        }
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        assert!(!maps.contains("memfd:vk-echo"), "{maps}");
        println!("CHILD-OK");
    }
}
