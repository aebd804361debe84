//! `wasi:filesystem/types` for plugins, with one change to wasmtime-wasi's
//! own implementation: opening a path never blocks the host.
//!
//! The workspace is the agent's, and a FIFO it plants (at `STYLE.md`, say)
//! would make wasmtime-wasi's `open-at` wait in the kernel for a writer, on
//! the evaluating thread, where no wall-clock bound reaches: the gate, and
//! with two of them the daemon, would hang for good. Here `open-at` opens
//! the path itself, beneath the directory handle (cap-std: no `..` out, no
//! absolute path, no symbolic link leaving it), with `O_NONBLOCK`, checks
//! what it opened (`fstat` on the handle, so nothing can be swapped in
//! between), keeps it only if it is a regular file or a directory, and
//! then clears `O_NONBLOCK`. A FIFO, socket or device is refused with
//! `access`, and the refusal is logged. Every other call is wasmtime-wasi's,
//! unchanged.
//!
//! What it must never do: grant a write. The workspace is preopened
//! read-only; an open asking to create, truncate or write is refused here,
//! before the OS sees it.

use cap_primitives::fs::{OpenOptions, OpenOptionsExt};
use std::os::fd::AsFd;
use wasmtime::component::{HasData, Linker, Resource};
use wasmtime_wasi::filesystem::{Descriptor, Dir, File, WasiFilesystemCtxView, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self, ErrorCode, HostDescriptor, HostDirectoryEntryStream,
};
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream, FsError, FsResult};
use wasmtime_wasi::{FsPerms, OpenMode};

/// wasmtime-wasi's filesystem view, with a non-blocking `open-at`.
pub(super) struct GuardedFs<'a>(pub WasiFilesystemCtxView<'a>);

/// The `HasData` marker that links [`GuardedFs`].
pub(super) struct GuardedFsData;

impl HasData for GuardedFsData {
    type Data<'a> = GuardedFs<'a>;
}

/// Replaces wasmtime-wasi's `wasi:filesystem/types` in `linker` (already
/// holding the rest of WASI) with [`GuardedFs`].
pub(super) fn shadow_filesystem<T: WasiFilesystemView + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    types::add_to_linker::<T, GuardedFsData>(linker, |t| GuardedFs(t.filesystem()))?;
    linker.allow_shadowing(false);
    Ok(())
}

/// What an open may yield.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Opened {
    File,
    Dir,
}

/// Why an open was refused before or after the OS saw it.
fn special_kind(file_type: rustix::fs::FileType) -> Option<&'static str> {
    use rustix::fs::FileType as T;
    match file_type {
        T::RegularFile | T::Directory => None,
        T::Fifo => Some("a FIFO"),
        T::Socket => Some("a socket"),
        T::CharacterDevice | T::BlockDevice => Some("a device"),
        T::Symlink => Some("a symbolic link"),
        T::Unknown => Some("of an unknown kind"),
    }
}

/// Opens `path` beneath `dir` for reading without blocking, and returns it
/// with `O_NONBLOCK` cleared when it is a regular file or a directory.
pub(crate) fn open_beneath(
    dir: &std::fs::File,
    path: &str,
    follow: bool,
) -> Result<(std::fs::File, Opened), ErrorCode> {
    let mut opts = OpenOptions::new();
    opts.read(true);
    let mut flags = rustix::fs::OFlags::NONBLOCK;
    if !follow {
        flags |= rustix::fs::OFlags::NOFOLLOW;
    }
    opts.custom_flags(flags.bits() as i32);
    let file =
        cap_primitives::fs::open(dir, path.as_ref(), &opts).map_err(|e| ErrorCode::from(&e))?;
    let stat =
        rustix::fs::fstat(file.as_fd()).map_err(|e| ErrorCode::from(&std::io::Error::from(e)))?;
    let kind = rustix::fs::FileType::from_raw_mode(stat.st_mode);
    if let Some(what) = special_kind(kind) {
        tracing::warn!(path, "a plugin's open of {what} was refused");
        return Err(ErrorCode::Access);
    }
    let status =
        rustix::fs::fcntl_getfl(&file).map_err(|e| ErrorCode::from(&std::io::Error::from(e)))?;
    rustix::fs::fcntl_setfl(&file, status - rustix::fs::OFlags::NONBLOCK)
        .map_err(|e| ErrorCode::from(&std::io::Error::from(e)))?;
    let opened = if kind == rustix::fs::FileType::Directory {
        Opened::Dir
    } else {
        Opened::File
    };
    Ok((file, opened))
}

impl types::Host for GuardedFs<'_> {
    fn convert_error_code(&mut self, err: FsError) -> wasmtime::Result<ErrorCode> {
        types::Host::convert_error_code(&mut self.0, err)
    }

    fn filesystem_error_code(
        &mut self,
        err: Resource<wasmtime::Error>,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        types::Host::filesystem_error_code(&mut self.0, err)
    }
}

impl HostDescriptor for GuardedFs<'_> {
    async fn open_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        oflags: types::OpenFlags,
        flags: types::DescriptorFlags,
    ) -> FsResult<Resource<types::Descriptor>> {
        let (dir, perms, allow_blocking) = match self.0.table.get(&fd)? {
            Descriptor::Dir(d) => (d.dir.clone(), d.perms, super::store::BLOCKING_FILE_IO),
            Descriptor::File(_) => return Err(ErrorCode::NotDirectory.into()),
        };
        let wants_write = oflags.intersects(
            types::OpenFlags::CREATE | types::OpenFlags::TRUNCATE | types::OpenFlags::EXCLUSIVE,
        ) || flags
            .intersects(types::DescriptorFlags::WRITE | types::DescriptorFlags::MUTATE_DIRECTORY);
        if wants_write || !matches!(perms, FsPerms::ReadOnly) {
            return Err(ErrorCode::NotPermitted.into());
        }
        if flags.intersects(
            types::DescriptorFlags::FILE_INTEGRITY_SYNC
                | types::DescriptorFlags::DATA_INTEGRITY_SYNC
                | types::DescriptorFlags::REQUESTED_WRITE_SYNC,
        ) {
            return Err(ErrorCode::Unsupported.into());
        }
        let follow = path_flags.contains(types::PathFlags::SYMLINK_FOLLOW);
        let (file, opened) = open_beneath(&dir, &path, follow)?;
        let descriptor = match opened {
            Opened::Dir => Descriptor::Dir(Dir::new(file, perms, OpenMode::READ, allow_blocking)),
            Opened::File if oflags.contains(types::OpenFlags::DIRECTORY) => {
                return Err(ErrorCode::NotDirectory.into());
            }
            Opened::File => {
                Descriptor::File(File::new(file, perms, OpenMode::READ, allow_blocking))
            }
        };
        Ok(self.0.table.push(descriptor)?)
    }

    async fn advise(
        &mut self,
        fd: Resource<types::Descriptor>,
        offset: types::Filesize,
        len: types::Filesize,
        advice: types::Advice,
    ) -> FsResult<()> {
        self.0.advise(fd, offset, len, advice).await
    }

    async fn sync_data(&mut self, fd: Resource<types::Descriptor>) -> FsResult<()> {
        self.0.sync_data(fd).await
    }

    async fn get_flags(
        &mut self,
        fd: Resource<types::Descriptor>,
    ) -> FsResult<types::DescriptorFlags> {
        self.0.get_flags(fd).await
    }

    async fn get_type(
        &mut self,
        fd: Resource<types::Descriptor>,
    ) -> FsResult<types::DescriptorType> {
        self.0.get_type(fd).await
    }

    async fn set_size(
        &mut self,
        fd: Resource<types::Descriptor>,
        size: types::Filesize,
    ) -> FsResult<()> {
        self.0.set_size(fd, size).await
    }

    async fn set_times(
        &mut self,
        fd: Resource<types::Descriptor>,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        self.0.set_times(fd, atim, mtim).await
    }

    async fn read(
        &mut self,
        fd: Resource<types::Descriptor>,
        len: types::Filesize,
        offset: types::Filesize,
    ) -> FsResult<(Vec<u8>, bool)> {
        self.0.read(fd, len, offset).await
    }

    async fn write(
        &mut self,
        fd: Resource<types::Descriptor>,
        buf: Vec<u8>,
        offset: types::Filesize,
    ) -> FsResult<types::Filesize> {
        self.0.write(fd, buf, offset).await
    }

    async fn read_directory(
        &mut self,
        fd: Resource<types::Descriptor>,
    ) -> FsResult<Resource<types::DirectoryEntryStream>> {
        self.0.read_directory(fd).await
    }

    async fn sync(&mut self, fd: Resource<types::Descriptor>) -> FsResult<()> {
        self.0.sync(fd).await
    }

    async fn create_directory_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path: String,
    ) -> FsResult<()> {
        self.0.create_directory_at(fd, path).await
    }

    async fn stat(&mut self, fd: Resource<types::Descriptor>) -> FsResult<types::DescriptorStat> {
        self.0.stat(fd).await
    }

    async fn stat_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::DescriptorStat> {
        self.0.stat_at(fd, path_flags, path).await
    }

    async fn set_times_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        self.0.set_times_at(fd, path_flags, path, atim, mtim).await
    }

    async fn link_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        old_path_flags: types::PathFlags,
        old_path: String,
        new_descriptor: Resource<types::Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        self.0
            .link_at(fd, old_path_flags, old_path, new_descriptor, new_path)
            .await
    }

    fn drop(&mut self, fd: Resource<types::Descriptor>) -> wasmtime::Result<()> {
        HostDescriptor::drop(&mut self.0, fd)
    }

    async fn readlink_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path: String,
    ) -> FsResult<String> {
        self.0.readlink_at(fd, path).await
    }

    async fn remove_directory_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path: String,
    ) -> FsResult<()> {
        self.0.remove_directory_at(fd, path).await
    }

    async fn rename_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        old_path: String,
        new_fd: Resource<types::Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        self.0.rename_at(fd, old_path, new_fd, new_path).await
    }

    async fn symlink_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        self.0.symlink_at(fd, src_path, dest_path).await
    }

    async fn unlink_file_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path: String,
    ) -> FsResult<()> {
        self.0.unlink_file_at(fd, path).await
    }

    fn read_via_stream(
        &mut self,
        fd: Resource<types::Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynInputStream>> {
        self.0.read_via_stream(fd, offset)
    }

    fn write_via_stream(
        &mut self,
        fd: Resource<types::Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynOutputStream>> {
        self.0.write_via_stream(fd, offset)
    }

    fn append_via_stream(
        &mut self,
        fd: Resource<types::Descriptor>,
    ) -> FsResult<Resource<DynOutputStream>> {
        self.0.append_via_stream(fd)
    }

    async fn is_same_object(
        &mut self,
        a: Resource<types::Descriptor>,
        b: Resource<types::Descriptor>,
    ) -> wasmtime::Result<bool> {
        self.0.is_same_object(a, b).await
    }

    async fn metadata_hash(
        &mut self,
        fd: Resource<types::Descriptor>,
    ) -> FsResult<types::MetadataHashValue> {
        self.0.metadata_hash(fd).await
    }

    async fn metadata_hash_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::MetadataHashValue> {
        self.0.metadata_hash_at(fd, path_flags, path).await
    }
}

impl HostDirectoryEntryStream for GuardedFs<'_> {
    async fn read_directory_entry(
        &mut self,
        stream: Resource<types::DirectoryEntryStream>,
    ) -> FsResult<Option<types::DirectoryEntry>> {
        self.0.read_directory_entry(stream).await
    }

    fn drop(&mut self, stream: Resource<types::DirectoryEntryStream>) -> wasmtime::Result<()> {
        HostDirectoryEntryStream::drop(&mut self.0, stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fifo_in(dir: &std::path::Path, name: &str) {
        let path = std::ffi::CString::new(dir.join(name).display().to_string()).expect("path");
        // SAFETY: mkfifo(3) with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn opens_files_and_dirs_and_refuses_a_fifo_at_once() {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::write(tmp.path().join("a.txt"), "hello").expect("write");
        std::fs::create_dir(tmp.path().join("sub")).expect("mkdir");
        fifo_in(tmp.path(), "STYLE.md");
        std::os::unix::fs::symlink("a.txt", tmp.path().join("link")).expect("symlink");
        std::os::unix::fs::symlink("/etc/passwd", tmp.path().join("out")).expect("symlink");
        let root = std::fs::File::open(tmp.path()).expect("open root");

        let (file, kind) = open_beneath(&root, "a.txt", true).expect("a file");
        assert_eq!(kind, Opened::File);
        let status = rustix::fs::fcntl_getfl(&file).expect("getfl");
        assert!(
            !status.contains(rustix::fs::OFlags::NONBLOCK),
            "O_NONBLOCK left set"
        );
        assert_eq!(
            open_beneath(&root, "sub", true).expect("a dir").1,
            Opened::Dir
        );
        // A FIFO with no writer: refused, not waited on.
        assert_eq!(
            open_beneath(&root, "STYLE.md", true).unwrap_err(),
            ErrorCode::Access
        );
        // Links: followed inside when asked, never out, never when not asked.
        assert_eq!(
            open_beneath(&root, "link", true).expect("inside").1,
            Opened::File
        );
        assert!(open_beneath(&root, "link", false).is_err());
        assert!(open_beneath(&root, "out", true).is_err());
        assert!(open_beneath(&root, "../etc/passwd", true).is_err());
        assert!(open_beneath(&root, "/etc/passwd", true).is_err());
        // /dev/null through a link that stays inside /dev is still a device.
        let dev = std::fs::File::open("/dev").expect("/dev");
        assert_eq!(
            open_beneath(&dev, "null", true).unwrap_err(),
            ErrorCode::Access
        );
    }
}
