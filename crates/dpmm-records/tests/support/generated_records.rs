//! Generated fertility-like records (8 columns: six yes/no or
//! male/female, age 21–35, weeks worked 0–52, as the schema of
//! `examples/fertility1980`), streamed as CSV: shared by the
//! bounded-memory test and the throughput benchmark.

use std::io::Read;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A reader that writes `rows` random fertility-like CSV records as it is
/// read, holding at most one line.
pub struct GeneratedRecords {
    rng: ChaCha8Rng,
    rows_left: usize,
    line: Vec<u8>,
    pos: usize,
    /// Bytes read so far.
    pub bytes: usize,
}

impl GeneratedRecords {
    /// `rows` records (after the header) drawn from a generator seeded by `seed`.
    pub fn new(rows: usize, seed: u64) -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(seed),
            rows_left: rows,
            line: b"morekids,gender1,gender2,age,afam,hispanic,other,work\n".to_vec(),
            pos: 0,
            bytes: 0,
        }
    }

    fn next_line(&mut self) {
        let yn = ["no", "yes"];
        let mf = ["male", "female"];
        let r = &mut self.rng;
        self.line = format!(
            "{},{},{},{},{},{},{},{}\n",
            yn[r.random_range(0..2)],
            mf[r.random_range(0..2)],
            mf[r.random_range(0..2)],
            r.random_range(21..36),
            yn[r.random_range(0..2)],
            yn[r.random_range(0..2)],
            yn[r.random_range(0..2)],
            r.random_range(0..53),
        )
        .into_bytes();
        self.pos = 0;
        self.rows_left -= 1;
    }
}

impl Read for GeneratedRecords {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut written = 0;
        while written < buf.len() {
            if self.pos == self.line.len() {
                if self.rows_left == 0 {
                    break;
                }
                self.next_line();
            }
            let n = (self.line.len() - self.pos).min(buf.len() - written);
            buf[written..written + n].copy_from_slice(&self.line[self.pos..self.pos + n]);
            self.pos += n;
            written += n;
        }
        self.bytes += written;
        Ok(written)
    }
}
