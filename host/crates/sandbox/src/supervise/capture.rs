//! Bounded capture of a child's output stream: keeps the tail, counts the
//! rest. A child that prints a gigabyte costs the host `cap` bytes.

use futures_lite::{AsyncRead, AsyncReadExt};
use std::collections::VecDeque;

/// The last `cap` bytes of a stream and how many bytes it carried.
#[derive(Debug, Default, Clone)]
pub struct TailBuffer {
    cap: usize,
    tail: VecDeque<u8>,
    total: u64,
}

impl TailBuffer {
    pub(crate) fn new(cap: usize) -> Self {
        TailBuffer {
            cap,
            tail: VecDeque::with_capacity(cap.min(64 * 1024)),
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, chunk: &[u8]) {
        self.total = self.total.saturating_add(chunk.len() as u64);
        let keep = if chunk.len() > self.cap {
            &chunk[chunk.len() - self.cap..]
        } else {
            chunk
        };
        let overflow = (self.tail.len() + keep.len()).saturating_sub(self.cap);
        self.tail.drain(..overflow.min(self.tail.len()));
        self.tail.extend(keep);
    }

    /// Bytes the stream carried in all, kept or not.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Whether bytes were dropped before the kept tail (the stream was
    /// longer than the cap).
    pub fn truncated(&self) -> bool {
        self.total > self.tail.len() as u64
    }

    /// Whether the kept tail holds `needle` (no copy of the tail).
    pub fn contains(&self, needle: &[u8]) -> bool {
        let (a, b) = self.tail.as_slices();
        if needle.is_empty() {
            return true;
        }
        if a.windows(needle.len()).any(|w| w == needle)
            || b.windows(needle.len()).any(|w| w == needle)
        {
            return true;
        }
        // Across the seam between the two halves of the ring.
        let n = needle.len() - 1;
        let seam: Vec<u8> = a[a.len().saturating_sub(n)..]
            .iter()
            .chain(&b[..n.min(b.len())])
            .copied()
            .collect();
        seam.windows(needle.len()).any(|w| w == needle)
    }

    /// The kept tail: the stream's last `cap` bytes at most.
    pub fn into_bytes(self) -> Vec<u8> {
        self.tail.into()
    }
}

/// Reads `reader` to its end into a shared tail buffer, so that what was
/// read is kept even if reading has to be abandoned.
pub(super) async fn capture_into<R: AsyncRead + Unpin>(
    mut reader: R,
    buf: std::sync::Arc<std::sync::Mutex<TailBuffer>>,
) {
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) => break,
            Ok(n) => buf
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::debug!(error = %e, "output stream read failed; keeping what was read");
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_everything_under_the_cap() {
        let mut b = TailBuffer::new(10);
        b.push(b"hello");
        b.push(b" you");
        assert!(!b.truncated());
        assert_eq!(b.total(), 9);
        assert_eq!(b.into_bytes(), b"hello you");
    }

    #[test]
    fn keeps_only_the_tail_over_the_cap() {
        let mut b = TailBuffer::new(4);
        b.push(b"abc");
        b.push(b"defgh");
        assert!(b.truncated());
        assert_eq!(b.total(), 8);
        assert_eq!(b.into_bytes(), b"efgh");
    }

    #[test]
    fn a_single_huge_chunk_is_cut_to_the_cap() {
        let mut b = TailBuffer::new(3);
        b.push(&[7u8; 1000]);
        b.push(b"xy");
        assert_eq!(b.total(), 1002);
        assert_eq!(b.into_bytes(), vec![7, b'x', b'y']);
    }

    #[test]
    fn zero_cap_keeps_nothing_but_counts() {
        let mut b = TailBuffer::new(0);
        b.push(b"abc");
        assert!(b.truncated());
        assert!(b.into_bytes().is_empty());
    }
}
