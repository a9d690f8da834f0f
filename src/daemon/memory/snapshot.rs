//! The on-disk image of one memory index, so a restart re-reads only the files that changed.
//!
//! Layout: the magic `ATMEMIX1`, the payload, and the SHA-256 of the payload. The payload is the
//! index's own shape, so neither side re-tokenizes: every file with its stamp and its sections
//! (heading, line range), numbered in that order, then every term with its postings (section
//! number, weighted frequency), in LEB128 varints and length-prefixed UTF-8. Decoding checks the digest first and then every count against the
//! bytes left, so a truncated, corrupted or foreign file is refused (and the index rebuilt from
//! the files), never trusted and never a panic.

use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::index::{FileEntry, Index, Postings, Section, Stamp};

const MAGIC: &[u8; 8] = b"ATMEMIX1";
const DIGEST_LEN: usize = 32;

/// Why a snapshot was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Corrupt {
    #[error("not a memory index snapshot")]
    Magic,
    #[error("the snapshot's checksum does not match its contents")]
    Checksum,
    #[error("the snapshot's contents are malformed")]
    Malformed,
}

/// The snapshot of `index`: its live sections renumbered in path order, and its postings.
pub fn encode(index: &Index) -> Vec<u8> {
    let mut files: Vec<(&Arc<str>, &FileEntry)> = index.files.iter().collect();
    files.sort_by(|a, b| a.0.cmp(b.0));
    let mut renumbered = vec![u32::MAX; index.sections.len()];
    let mut out = Vec::with_capacity(1 << 16);
    out.extend_from_slice(MAGIC);
    varint(&mut out, files.len() as u64);
    let mut next = 0u32;
    for (path, file) in files {
        string(&mut out, path);
        out.extend_from_slice(&file.stamp.len.to_le_bytes());
        out.extend_from_slice(&file.stamp.mtime_ns.to_le_bytes());
        out.extend_from_slice(&file.stamp.ino.to_le_bytes());
        varint(&mut out, file.sections.len() as u64);
        for id in &file.sections {
            let section = index.section(*id);
            renumbered[*id as usize] = next;
            next += 1;
            string(&mut out, &section.heading);
            varint(&mut out, u64::from(section.line_start));
            varint(&mut out, u64::from(section.line_end));
        }
    }
    let renumbered = &renumbered[..];
    let terms: Vec<(&str, &Postings)> = index
        .term_text
        .iter()
        .zip(&index.postings)
        .filter(|(_, postings)| live(postings, renumbered).next().is_some())
        .map(|(term, postings)| (&**term, postings))
        .collect();
    varint(&mut out, terms.len() as u64);
    for (term, postings) in terms {
        string(&mut out, term);
        varint(&mut out, live(postings, renumbered).count() as u64);
        for (section, tf) in live(postings, renumbered) {
            varint(&mut out, u64::from(renumbered[*section as usize]));
            varint(&mut out, u64::from(*tf));
        }
    }
    let digest = Sha256::digest(&out[MAGIC.len()..]);
    out.extend_from_slice(&digest);
    out
}

/// The postings of sections still live (renumbered), with their frequencies.
fn live<'a>(
    postings: &'a Postings,
    renumbered: &'a [u32],
) -> impl Iterator<Item = (&'a u32, &'a u16)> + 'a {
    postings
        .sections
        .iter()
        .zip(&postings.tfs)
        .filter(|(section, _)| renumbered[**section as usize] != u32::MAX)
}

/// The index a snapshot holds.
pub fn decode(bytes: &[u8]) -> Result<Index, Corrupt> {
    if bytes.len() < MAGIC.len() + DIGEST_LEN || &bytes[..MAGIC.len()] != MAGIC {
        return Err(Corrupt::Magic);
    }
    let (payload, digest) = bytes[MAGIC.len()..].split_at(bytes.len() - MAGIC.len() - DIGEST_LEN);
    if Sha256::digest(payload).as_slice() != digest {
        return Err(Corrupt::Checksum);
    }
    let mut reader = Reader(payload);
    let mut index = Index::default();
    for _ in 0..reader.count()? {
        let path: Arc<str> = Arc::from(reader.string()?);
        let stamp = Stamp {
            len: u64::from_le_bytes(reader.array()?),
            mtime_ns: i64::from_le_bytes(reader.array()?),
            ino: u64::from_le_bytes(reader.array()?),
        };
        let mut ids = Vec::new();
        for _ in 0..reader.count()? {
            let heading = reader.string()?.into();
            let (line_start, line_end) = (reader.small()?, reader.small()?);
            if line_start == 0 || line_end < line_start {
                return Err(Corrupt::Malformed);
            }
            ids.push(index.sections.len() as u32);
            index.sections.push(Some(Section {
                path: path.clone(),
                heading,
                line_start,
                line_end,
                len: 0,
            }));
        }
        if index
            .files
            .insert(
                path,
                FileEntry {
                    stamp,
                    sections: ids,
                },
            )
            .is_some()
        {
            return Err(Corrupt::Malformed);
        }
    }
    for _ in 0..reader.count()? {
        let term = reader.string()?.to_string();
        if index.term_ids.contains_key(term.as_str()) {
            return Err(Corrupt::Malformed);
        }
        let id = index.term_id(term) as usize;
        for _ in 0..reader.count()? {
            let section = reader.small()?;
            let tf = u16::try_from(reader.varint()?).map_err(|_| Corrupt::Malformed)?;
            let Some(Some(indexed)) = index.sections.get_mut(section as usize) else {
                return Err(Corrupt::Malformed);
            };
            if tf == 0 {
                return Err(Corrupt::Malformed);
            }
            indexed.len += u32::from(tf);
            index.postings[id].sections.push(section);
            index.postings[id].tfs.push(tf);
        }
    }
    if !reader.0.is_empty() {
        return Err(Corrupt::Malformed);
    }
    index.live = index.sections.len();
    index.total_len = index
        .sections
        .iter()
        .flatten()
        .map(|section| u64::from(section.len))
        .sum();
    Ok(index)
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn string(out: &mut Vec<u8>, s: &str) {
    varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, Corrupt> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.0.split_first().ok_or(Corrupt::Malformed)?;
            self.0 = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(Corrupt::Malformed)
    }

    /// A count of items still to read: each takes at least one byte, so a count over the bytes
    /// left is malformed (and never allocates).
    fn count(&mut self) -> Result<usize, Corrupt> {
        let count = self.varint()?;
        usize::try_from(count)
            .ok()
            .filter(|count| *count <= self.0.len())
            .ok_or(Corrupt::Malformed)
    }

    fn small(&mut self) -> Result<u32, Corrupt> {
        u32::try_from(self.varint()?).map_err(|_| Corrupt::Malformed)
    }

    fn bytes(&mut self, len: usize) -> Result<&'a [u8], Corrupt> {
        if len > self.0.len() {
            return Err(Corrupt::Malformed);
        }
        let (head, rest) = self.0.split_at(len);
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Corrupt> {
        Ok(self.bytes(N)?.try_into().expect("N bytes"))
    }

    fn string(&mut self) -> Result<&'a str, Corrupt> {
        let len = self.count()?;
        std::str::from_utf8(self.bytes(len)?).map_err(|_| Corrupt::Malformed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::memory::index::parse;

    fn sample() -> Index {
        let mut index = Index::default();
        let stamp = Stamp {
            len: 42,
            mtime_ns: -5,
            ino: 7,
        };
        index.put(
            "a.md",
            stamp,
            parse("# Deploy\nrun the script\n## 部署\n流程\n"),
        );
        index.put("notes/b.md", Stamp::default(), parse("plain words\n"));
        // A replaced file leaves tombstones, which the snapshot leaves out.
        index.put(
            "notes/b.md",
            Stamp::default(),
            parse("# Plain\nwords again\n"),
        );
        index
    }

    #[test]
    fn a_snapshot_round_trips_and_answers_the_same() {
        let index = sample();
        let bytes = encode(&index);
        let decoded = decode(&bytes).unwrap();
        assert_eq!(encode(&decoded), bytes);
        let terms = crate::search::Query::parse("script 部署").index_terms();
        assert_eq!(decoded.search(&terms, 5), index.search(&terms, 5));
        assert_eq!(decoded.stamp("a.md").unwrap().ino, 7);
        assert_eq!((decoded.files(), decoded.sections()), (2, 3));
        let plain = crate::search::Query::parse("plain words").index_terms();
        assert_eq!(decoded.search(&plain, 5), index.search(&plain, 5));
    }

    #[test]
    fn every_truncation_and_a_flipped_byte_are_refused() {
        let bytes = encode(&sample());
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_err(), "truncated to {len}");
        }
        for at in 0..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x10;
            assert!(decode(&flipped).is_err(), "byte {at} flipped");
        }
    }

    #[test]
    fn a_well_checksummed_but_malformed_payload_is_refused() {
        // A huge count with a valid digest must not allocate or panic.
        let mut payload = Vec::new();
        varint(&mut payload, u64::MAX);
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&payload);
        bytes.extend_from_slice(&Sha256::digest(&payload));
        assert_eq!(decode(&bytes).err(), Some(Corrupt::Malformed));

        // A posting of a section that does not exist.
        let mut payload = Vec::new();
        varint(&mut payload, 0);
        varint(&mut payload, 1);
        string(&mut payload, "x");
        for value in [1, 5, 1] {
            varint(&mut payload, value);
        }
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&payload);
        bytes.extend_from_slice(&Sha256::digest(&payload));
        assert_eq!(decode(&bytes).err(), Some(Corrupt::Malformed));
    }
}
