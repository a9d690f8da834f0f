//! Reading a runtime's JSONL files: plain or zstd-compressed, a line at a time, each line bounded.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

/// The longest line read: far above any record the runtimes write (their tool results are capped
/// well below it). A longer one is skipped and counted as malformed; memory stays bounded
/// whatever a file holds.
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// Opens `path`, decoding it when it ends in `.zst` (Codex compresses rollouts it no longer writes).
pub fn open(path: &Path) -> io::Result<Box<dyn BufRead>> {
    let file = File::open(path)?;
    let reader = BufReader::with_capacity(256 * 1024, file);
    if path.extension().is_some_and(|e| e == "zst") {
        let decoder = ruzstd::decoding::StreamingDecoder::new(reader)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        Ok(Box::new(BufReader::with_capacity(256 * 1024, decoder)))
    } else {
        Ok(Box::new(reader))
    }
}

/// Calls `each` with every line of `reader` (without its newline) and `false`, or with an empty
/// slice and `true` for a line over `max` bytes. Returns the bytes read.
pub fn for_each(
    reader: &mut dyn BufRead,
    max: usize,
    mut each: impl FnMut(&[u8], bool),
) -> io::Result<u64> {
    let mut line = Vec::new();
    let mut overlong = false;
    let mut read = 0u64;
    loop {
        let buffer = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buffer.is_empty() {
            break;
        }
        let (chunk, end) = match memchr::memchr(b'\n', buffer) {
            Some(at) => (&buffer[..at], Some(at + 1)),
            None => (buffer, None),
        };
        if !overlong {
            if line.len() + chunk.len() > max {
                overlong = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = end.unwrap_or(buffer.len());
        reader.consume(used);
        read += used as u64;
        if end.is_some() {
            emit(&mut line, &mut overlong, &mut each);
        }
    }
    emit(&mut line, &mut overlong, &mut each);
    Ok(read)
}

fn emit(line: &mut Vec<u8>, overlong: &mut bool, each: &mut impl FnMut(&[u8], bool)) {
    if *overlong {
        each(&[], true);
    } else {
        let text = line.strip_suffix(b"\r").unwrap_or(line);
        if !text.iter().all(u8::is_ascii_whitespace) {
            each(text, false);
        }
    }
    line.clear();
    *overlong = false;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_bounded_and_blank_ones_skipped() {
        let data = b"one\n\n  \nthree-long-line\r\nlast";
        let mut seen = Vec::new();
        let read = for_each(&mut &data[..], 6, |line, over| {
            seen.push((String::from_utf8_lossy(line).into_owned(), over))
        })
        .unwrap();
        assert_eq!(read, data.len() as u64);
        assert_eq!(
            seen,
            vec![
                ("one".into(), false),
                (String::new(), true),
                ("last".into(), false)
            ]
        );
    }
}
