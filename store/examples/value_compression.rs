//! How the store's values compress against each of its dictionaries, and what that costs.
//!
//! Reads objects as `kemu kv get --prefix KEY -o json` prints them (one or more files) and,
//! per object, prints its JSON size and its stored size against each dictionary; then the
//! totals and the time to compress and decode the whole set once against each dictionary.
//! `--candidate FILE` adds a dictionary that is not built in (one typical object per line), to
//! judge a new one before it gets a format byte.
//!
//! `cargo run --release -p store --example value_compression -- [--candidate FILE] OBJECTS.json...`

use std::time::Instant;

use store::types::stored_values::{DICTIONARY_1, DICTIONARY_2, DICTIONARY_3};

const ROUNDS: u32 = 2_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut dictionaries: Vec<(String, Vec<u8>)> = vec![
        ("dictionary 1".into(), DICTIONARY_1.to_vec()),
        ("dictionary 2".into(), DICTIONARY_2.to_vec()),
        ("dictionary 3".into(), DICTIONARY_3.to_vec()),
    ];
    let mut values: Vec<(String, Vec<u8>)> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--candidate" {
            let path = args.next().ok_or("--candidate needs a file")?;
            let bytes = std::fs::read(&path).map_err(|e| format!("{path}: {e}"))?;
            dictionaries.push((format!("candidate {path}"), bytes));
            continue;
        }
        let text = std::fs::read_to_string(&arg).map_err(|e| format!("{arg}: {e}"))?;
        let doc: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{arg}: {e}"))?;
        let kvs = doc["kvs"]
            .as_array()
            .ok_or_else(|| format!("{arg}: no `kvs` array (expected `kemu kv get -o json`)"))?;
        for kv in kvs {
            let (Some(key), Some(value)) = (kv["key"].as_str(), kv["value"].as_str()) else {
                return Err(format!("{arg}: an entry without a string key and value").into());
            };
            values.push((key.to_string(), value.as_bytes().to_vec()));
        }
    }
    if values.is_empty() {
        return Err("no objects given; pass files of `kemu kv get --prefix KEY -o json`".into());
    }

    print!("{:<60} {:>7}", "key", "json");
    for (at, _) in dictionaries.iter().enumerate() {
        print!(" {:>7}", format!("dict {}", at + 1));
    }
    println!();
    let mut totals = vec![0usize; dictionaries.len()];
    let json_total: usize = values.iter().map(|(_, v)| v.len()).sum();
    for (key, value) in &values {
        print!("{key:<60} {:>7}", value.len());
        for (at, (_, dictionary)) in dictionaries.iter().enumerate() {
            let size = lz4_flex::block::compress_with_dict(value, dictionary).len();
            totals[at] += size;
            print!(" {size:>7}");
        }
        println!();
    }
    println!("{:<60} {json_total:>7}", "total");
    for (at, (name, dictionary)) in dictionaries.iter().enumerate() {
        let compressed: Vec<Vec<u8>> = values
            .iter()
            .map(|(_, v)| lz4_flex::block::compress_with_dict(v, dictionary))
            .collect();
        let start = Instant::now();
        for _ in 0..ROUNDS {
            for (_, value) in &values {
                std::hint::black_box(lz4_flex::block::compress_with_dict(value, dictionary));
            }
        }
        let compress = start.elapsed() / ROUNDS / values.len() as u32;
        let start = Instant::now();
        for _ in 0..ROUNDS {
            for ((_, value), stored) in values.iter().zip(&compressed) {
                let out = lz4_flex::block::decompress_with_dict(stored, value.len(), dictionary)?;
                assert_eq!(&out, value, "a value decodes to what was compressed");
            }
        }
        let decode = start.elapsed() / ROUNDS / values.len() as u32;
        println!(
            "dict {} ({name}, {} bytes): {} bytes stored of {json_total} ({:.1} %), \
             {compress:?} to compress and {decode:?} to decode per object",
            at + 1,
            dictionary.len(),
            totals[at],
            100.0 * totals[at] as f64 / json_total as f64,
        );
    }
    Ok(())
}
