//! Writing an output file so that it appears complete or not at all: the text goes to a
//! temporary file in the destination's directory, which is renamed over the destination
//! once everything is written. On failure the temporary file is removed.
//!
//! The file is not synced to disk before the rename (that costs as much as a fifth of a
//! run on large outputs): other processes see the old file or the complete new one, and
//! only a machine crash right after a run can lose what the page cache still held.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::scorefile::ScoreFileError;

static TEMP_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A temporary file beside `dst`, created new (never an existing file).
fn create_temp(dst: &Path) -> io::Result<(PathBuf, File)> {
    let dir = match dst.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = dst
        .file_name()
        .map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned());
    loop {
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = dir.join(format!(".{name}.{}-{n}.tmp", std::process::id()));
        match OpenOptions::new().write(true).create_new(true).open(&temp) {
            Ok(file) => return Ok((temp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// True when `dst` exists and is not a regular file (a device such as `/dev/null`, a pipe):
/// it cannot be replaced by renaming, so it is written in place.
fn is_special(dst: &Path) -> bool {
    fs::metadata(dst).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// Runs `write` on a buffered writer whose text ends up in `dst` only if `write` succeeds.
pub fn write_atomically<T>(
    dst: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> Result<T, ScoreFileError>,
) -> Result<T, ScoreFileError> {
    let cannot_write = |error: io::Error| ScoreFileError::Io {
        what: format!("cannot write {}", dst.display()),
        error,
    };
    if is_special(dst) {
        let file = OpenOptions::new()
            .write(true)
            .open(dst)
            .map_err(cannot_write)?;
        let mut out = BufWriter::new(file);
        let value = write(&mut out)?;
        out.flush().map_err(cannot_write)?;
        return Ok(value);
    }
    if dst.is_dir() {
        return Err(cannot_write(io::Error::new(
            io::ErrorKind::IsADirectory,
            "is a directory",
        )));
    }
    let (temp, file) = create_temp(dst).map_err(cannot_write)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let finished = write(&mut out).and_then(|value| {
        let file = out.into_inner().map_err(|e| cannot_write(e.into_error()))?;
        drop(file);
        fs::rename(&temp, dst).map_err(cannot_write)?;
        Ok(value)
    });
    if finished.is_err() {
        // Best effort: the temporary file may already be gone.
        let _ = fs::remove_file(&temp);
    }
    finished
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("agentrl-atomic-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let _ = fs::create_dir_all(&dir);
        dir
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .map(|it| {
                it.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    #[test]
    fn success_renames_and_failure_leaves_nothing() {
        let dir = scratch("rename");
        let dst = dir.join("out.jsonl");
        let ok = write_atomically(&dst, |out| {
            out.write_all(b"done\n")
                .map_err(|error| ScoreFileError::Io {
                    what: "test".into(),
                    error,
                })
        });
        assert!(ok.is_ok());
        assert_eq!(fs::read(&dst).unwrap_or_default(), b"done\n");
        let failed: Result<(), _> = write_atomically(&dst, |out| {
            let _ = out.write_all(b"partial");
            Err(ScoreFileError::Internal("stopped".into()))
        });
        assert!(failed.is_err());
        // The old output is untouched and no temporary file is left.
        assert_eq!(fs::read(&dst).unwrap_or_default(), b"done\n");
        assert_eq!(entries(&dir), vec!["out.jsonl".to_string()]);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_directory_or_missing_folder_is_an_error_naming_the_path() {
        let dir = scratch("errors");
        let err = write_atomically(&dir, |_| Ok(())).err();
        assert!(err.is_some_and(|e| e.to_string().contains("is a directory")));
        let missing = dir.join("no/such/out.jsonl");
        let err = write_atomically(&missing, |_| Ok(())).err();
        assert!(err.is_some_and(|e| e.to_string().contains("no/such/out.jsonl")));
        let _ = fs::remove_dir_all(&dir);
    }
}
