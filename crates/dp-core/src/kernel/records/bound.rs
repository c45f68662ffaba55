//! At most `K` records per privacy unit, chosen at random, in bounded
//! memory.
//!
//! Each kept record gets a priority, a uniform 64-bit draw from the
//! kernel's random source, independent of the input's order; a unit's
//! `K` records of smallest priority are kept, a uniform random `K`-subset
//! of its records whatever order they come in.
//!
//! Records are first spread over [`PARTITIONS`] partitions by their
//! unit's hash, each worker buffering fixed-size entries in memory and
//! appending them to one file per partition (in a private temporary
//! directory, removed when done) once its buffers pass its share of the
//! memory limit. Then each partition is read back once, keeping for each
//! of its units the `K` entries of smallest priority, and those are
//! counted. Memory is the buffers, plus one partition's units (about
//! `units / 256` of them) times `K` entries: 10⁷ units of ten attributes
//! take a few tens of MB, not the gigabytes of every unit's records. A
//! stream's bound on steps keeps `K` entries per unit and step, so there
//! a partition takes up to its units' steps times `K` entries: at most the
//! partition's records.

use std::collections::{BinaryHeap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use crate::{DpError, Result};

use super::tables::CountTable;

/// Partitions of the units (by the top bits of their hash).
pub(crate) const PARTITIONS: usize = 256;

/// Spill directories alive, for [`remove_spills`] (a signal handler).
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn live() -> MutexGuard<'static, Vec<PathBuf>> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Removes every spill directory of this process that is still there, for
/// a signal or panic handler about to end the process (the directories
/// hold private records). The registry stays locked until the process
/// ends, so no spill directory is created after this returns: call it
/// only right before exiting.
pub fn remove_spills() {
    let mut live = live();
    for dir in live.drain(..) {
        let _ = std::fs::remove_dir_all(dir);
    }
    std::mem::forget(live);
}

/// A failure of the spill files: the operating system's (a full disk, too
/// many open files), reported as such, never as a bug.
fn io(what: &str, e: std::io::Error) -> DpError {
    let hint = if e.raw_os_error() == Some(24) {
        " (a privacy unit's spill holds 256 files open: raise the limit, `ulimit -n`)"
    } else {
        ""
    };
    DpError::Io(format!("{what}: {e}{hint}"))
}

/// The partition files, all created on the first spill in a directory
/// only this user can read. On Unix each file is unlinked as soon as it
/// is open and the directory removed at once: the records live only in
/// open files, which no other process can open and which vanish with the
/// process however it ends (a signal, `SIGKILL`, a crash). Elsewhere the
/// directory is removed on drop and by [`remove_spills`].
pub(crate) struct Spill {
    parent: PathBuf,
    /// The directory while it exists (until drop where files cannot be
    /// unlinked while open).
    dir: Mutex<Option<PathBuf>>,
    files: Mutex<Vec<Option<BufWriter<File>>>>,
}

impl Spill {
    pub(crate) fn new(parent: PathBuf) -> Self {
        Self {
            parent,
            dir: Mutex::new(None),
            files: Mutex::new((0..PARTITIONS).map(|_| None).collect()),
        }
    }

    /// Creates the partition files (once).
    fn create(&self, files: &mut [Option<BufWriter<File>>], tag: u64) -> Result<()> {
        if files.iter().all(Option::is_some) {
            return Ok(());
        }
        let path = self
            .parent
            .join(format!("dpmm-records-{}-{tag:016x}", std::process::id()));
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
            .create(&path)
            .map_err(|e| io("cannot create the spill directory", e))?;
        live().push(path.clone());
        *self.dir.lock().unwrap_or_else(|p| p.into_inner()) = Some(path.clone());
        match open_all(&path, files) {
            Ok(()) => {
                // On Unix the files have no names left: the directory goes.
                #[cfg(unix)]
                {
                    std::fs::remove_dir(&path)
                        .map_err(|e| io("cannot remove the spill directory", e))?;
                    live().retain(|d| *d != path);
                    *self.dir.lock().unwrap_or_else(|p| p.into_inner()) = None;
                }
                Ok(())
            }
            Err(e) => {
                // All or none: a worker that comes next meets the same
                // failure, never files created in part.
                files.iter_mut().for_each(|f| drop(f.take()));
                let _ = std::fs::remove_dir_all(&path);
                live().retain(|d| *d != path);
                *self.dir.lock().unwrap_or_else(|p| p.into_inner()) = None;
                Err(e)
            }
        }
    }

    /// Appends each partition's bytes to its file.
    fn append(&self, buffers: &mut [Vec<u8>], tag: u64) -> Result<()> {
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        self.create(&mut files, tag)?;
        for (p, buffer) in buffers.iter_mut().enumerate() {
            if buffer.is_empty() {
                continue;
            }
            let file = files[p]
                .as_mut()
                .ok_or_else(|| io("a spill file", std::io::Error::other("was not created")))?;
            file.write_all(buffer)
                .map_err(|e| io("cannot write a spill file", e))?;
            buffer.clear();
        }
        Ok(())
    }

    /// The spilled bytes of partition `p`, if any (its writer flushed and
    /// the file read from its start).
    fn reader(&self, p: usize) -> Result<Option<BufReader<File>>> {
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let Some(writer) = files[p].take() else {
            return Ok(None);
        };
        let mut file = writer
            .into_inner()
            .map_err(|e| io("cannot write a spill file", e.into_error()))?;
        file.seek(SeekFrom::Start(0))
            .map_err(|e| io("cannot read a spill file", e))?;
        Ok(Some(BufReader::with_capacity(1 << 16, file)))
    }
}

impl Drop for Spill {
    fn drop(&mut self) {
        // Closing the files frees an unlinked file's space.
        self.files
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter_mut()
            .for_each(|f| drop(f.take()));
        if let Some(dir) = self.dir.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = std::fs::remove_dir_all(&dir);
            live().retain(|d| *d != dir);
        }
    }
}

/// Opens every partition's file in `dir` (unlinked at once on Unix).
fn open_all(dir: &Path, files: &mut [Option<BufWriter<File>>]) -> Result<()> {
    for (p, slot) in files.iter_mut().enumerate() {
        let name = partition_path(dir, p);
        let mut options = OpenOptions::new();
        options.create_new(true).read(true).write(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options
            .open(&name)
            .map_err(|e| io("cannot create a spill file", e))?;
        #[cfg(unix)]
        std::fs::remove_file(&name).map_err(|e| io("cannot unlink a spill file", e))?;
        *slot = Some(BufWriter::with_capacity(1 << 16, file));
    }
    Ok(())
}

fn partition_path(dir: &Path, p: usize) -> PathBuf {
    dir.join(format!("{p:03}"))
}

/// The bytes of one entry: unit (16), priority (8), value (8), step (4),
/// then one code (4) per attribute.
pub(crate) fn entry_bytes(width: usize) -> usize {
    36 + 4 * width
}

/// A worker's side: its entries, by partition, in memory until they pass
/// `limit` bytes.
pub(crate) struct Buffer {
    width: usize,
    partitions: Vec<Vec<u8>>,
    held: usize,
    limit: usize,
}

impl Buffer {
    pub(crate) fn new(width: usize, limit: usize) -> Self {
        Self {
            width,
            partitions: (0..PARTITIONS).map(|_| Vec::new()).collect(),
            held: 0,
            limit: limit.max(entry_bytes(width) * PARTITIONS),
        }
    }

    /// Buffers one record: its entry (unit, priority, value, step) and
    /// its `codes`, spilling to `spill` past the limit.
    pub(crate) fn push(
        &mut self,
        entry: Entry,
        codes: impl Iterator<Item = u32>,
        spill: &Spill,
        tag: u64,
    ) -> Result<()> {
        let p = (entry.unit >> 120) as usize;
        let out = &mut self.partitions[p];
        out.extend_from_slice(&entry.unit.to_le_bytes());
        out.extend_from_slice(&entry.priority.to_le_bytes());
        out.extend_from_slice(&entry.value.to_le_bytes());
        out.extend_from_slice(&entry.step.to_le_bytes());
        for c in codes {
            out.extend_from_slice(&c.to_le_bytes());
        }
        self.held += entry_bytes(self.width);
        if self.held >= self.limit {
            spill.append(&mut self.partitions, tag)?;
            self.held = 0;
        }
        Ok(())
    }
}

/// One record's fixed fields: its unit's hash, its priority (the smaller
/// kept first), its contribution in counts and its step.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    pub(crate) unit: u128,
    pub(crate) priority: u64,
    pub(crate) value: u64,
    pub(crate) step: u32,
}

/// One kept entry of a unit; its codes are the partition arena's
/// `width` codes at its own index times `width`.
#[derive(Clone, Copy)]
struct Kept {
    value: u64,
    step: u32,
}

/// A unit's kept entries, `(priority, index)`, the largest priority on top.
type Heap = BinaryHeap<(u64, usize)>;

/// A step's priority within its unit (uniform, keyed by the counting).
pub(crate) type StepPriority<'a> = dyn Fn(u128, u32) -> u64 + 'a;

/// Keeps, for each unit of partition `p`, the `k` entries of smallest
/// priority among the spilled ones and every worker's buffered ones, and
/// counts them into `tables`. With a [`StepBound`](super::StepBound) the
/// `k` are kept in each step of the unit, and of its steps only those
/// the bound keeps are counted: in the order of their priorities, each
/// kept when it is at least the separation away from every step kept
/// before it, until the bound's number are kept.
pub(crate) fn count_partition(
    p: usize,
    k: usize,
    steps: Option<(super::StepBound, &StepPriority<'_>)>,
    width: usize,
    spill: &Spill,
    buffers: &[Buffer],
    tables: &mut [CountTable],
) -> Result<()> {
    let size = entry_bytes(width);
    // Per unit (and step, under a step bound), a max-heap of its kept
    // entries' (priority, index): the entry to replace is at its top, so
    // a unit of n records costs O(n log k), whatever k.
    let by_step = steps.is_some();
    let mut units: HashMap<(u128, u32), Heap> = HashMap::new();
    let mut kept: Vec<Kept> = Vec::new();
    let mut arena: Vec<u32> = Vec::new();
    let mut take = |entry: &[u8]| {
        let word = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&entry[i..i + 8]);
            u64::from_le_bytes(b)
        };
        let mut u = [0u8; 16];
        u.copy_from_slice(&entry[..16]);
        let unit = u128::from_le_bytes(u);
        let (priority, value) = (word(16), word(24));
        let mut s = [0u8; 4];
        s.copy_from_slice(&entry[32..36]);
        let step = u32::from_le_bytes(s);
        let codes = entry[36..].chunks_exact(4).map(|c| {
            let mut b = [0u8; 4];
            b.copy_from_slice(c);
            u32::from_le_bytes(b)
        });
        let heap = units
            .entry((unit, if by_step { step } else { 0 }))
            .or_default();
        if heap.len() < k {
            heap.push((priority, kept.len()));
            kept.push(Kept { value, step });
            arena.extend(codes);
            return;
        }
        // Replace the kept entry of largest priority if this one is smaller.
        if let Some(mut top) = heap.peek_mut()
            && priority < top.0
        {
            let i = top.1;
            for (slot, c) in arena[i * width..(i + 1) * width].iter_mut().zip(codes) {
                *slot = c;
            }
            kept[i] = Kept { value, step };
            *top = (priority, i);
        }
    };
    if let Some(mut file) = spill.reader(p)? {
        let mut block = vec![0u8; size * 4096];
        loop {
            let mut filled = 0;
            while filled < block.len() {
                match file.read(&mut block[filled..]) {
                    Ok(0) => break,
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(io("cannot read a spill file", e)),
                }
            }
            if filled % size != 0 {
                return Err(io(
                    "a spill file",
                    std::io::Error::other("ends within an entry"),
                ));
            }
            block[..filled].chunks_exact(size).for_each(&mut take);
            if filled < block.len() {
                break;
            }
        }
    }
    for buffer in buffers {
        buffer.partitions[p].chunks_exact(size).for_each(&mut take);
    }
    let mut count = |i: usize| {
        let codes = &arena[i * width..(i + 1) * width];
        for t in tables.iter_mut() {
            t.count_one(codes, kept[i].step, kept[i].value);
        }
    };
    let Some((bound, priority)) = steps else {
        drop(units);
        (0..kept.len()).for_each(count);
        return Ok(());
    };
    // Each unit's steps in the order of their priorities.
    let mut order: Vec<(u128, u64, u32, Heap)> = units
        .into_iter()
        .map(|((unit, step), heap)| (unit, priority(unit, step), step, heap))
        .collect();
    order.sort_unstable_by_key(|&(unit, priority, step, _)| (unit, priority, step));
    let (most, apart) = (bound.max_steps as usize, bound.min_separation);
    // Never reserved by the bound, which may be any u32.
    let mut chosen: Vec<u32> = Vec::new();
    let mut current = None;
    for (unit, _, step, heap) in order {
        if current != Some(unit) {
            current = Some(unit);
            chosen.clear();
        }
        if chosen.len() < most && chosen.iter().all(|&s| s.abs_diff(step) >= apart) {
            chosen.push(step);
            heap.into_iter().for_each(|(_, i)| count(i));
        }
    }
    Ok(())
}
