//! The decoded value: what `json.loads` would return, as Rust data.

use std::collections::HashMap;

/// A JSON value as Python sees it after `json.loads`.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    /// An integer that fits in `i64`.
    Int(i64),
    /// An integer outside `i64`, kept as its decimal text (optional `-`, then digits, no
    /// leading zeros). Python turns it into an exact `int`.
    BigInt(String),
    Float(f64),
    Str(String),
    Array(Vec<Value>),
    Object(Object),
}

impl Value {
    /// Python truthiness: `None`, `False`, zero, and empty strings and containers are false.
    pub fn is_truthy(&self) -> bool {
        match self {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::Int(i) => *i != 0,
            // Decimal text outside i64 is never zero.
            Value::BigInt(_) => true,
            // NaN is truthy in Python (it is not equal to zero).
            Value::Float(f) => *f != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::Array(a) => !a.is_empty(),
            Value::Object(o) => !o.is_empty(),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    pub fn is_object(&self) -> bool {
        matches!(self, Value::Object(_))
    }

    /// The Python type name, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "NoneType",
            Value::Bool(_) => "bool",
            Value::Int(_) | Value::BigInt(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Array(_) => "list",
            Value::Object(_) => "dict",
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s)
    }
}

impl From<Object> for Value {
    fn from(o: Object) -> Self {
        Value::Object(o)
    }
}

/// Objects at or below this size find duplicate keys by scanning instead of hashing.
const SMALL_OBJECT: usize = 8;

/// A JSON object with the behaviour of a Python dict: keys unique, kept in insertion order,
/// and assigning an existing key replaces its value in place.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Object {
    entries: Vec<(String, Value)>,
}

impl Object {
    pub fn new() -> Self {
        Object {
            entries: Vec::new(),
        }
    }

    /// Builds an object from pairs in order, as `dict(pairs)` does: a repeated key keeps its
    /// first position and takes its last value. Linear time in the number of pairs.
    pub fn from_pairs(pairs: Vec<(String, Value)>) -> Self {
        if pairs.len() <= SMALL_OBJECT {
            // Nearly always the keys are distinct: then the pairs are the entries as they are.
            let distinct =
                (1..pairs.len()).all(|i| pairs[..i].iter().all(|(k, _)| *k != pairs[i].0));
            if distinct {
                return Object { entries: pairs };
            }
            let mut obj = Object {
                entries: Vec::with_capacity(pairs.len()),
            };
            for (k, v) in pairs {
                obj.insert(k, v);
            }
            return obj;
        }
        // For each pair, the index of the first pair with the same key.
        let first_of: Vec<usize> = {
            let mut seen: HashMap<&str, usize> = HashMap::with_capacity(pairs.len());
            pairs
                .iter()
                .enumerate()
                .map(|(i, (k, _))| *seen.entry(k.as_str()).or_insert(i))
                .collect()
        };
        let mut slot_of_first = vec![usize::MAX; pairs.len()];
        let mut entries: Vec<(String, Value)> = Vec::with_capacity(pairs.len());
        for (i, (k, v)) in pairs.into_iter().enumerate() {
            let first = first_of[i];
            if first == i {
                slot_of_first[i] = entries.len();
                entries.push((k, v));
            } else if let Some(entry) = entries.get_mut(slot_of_first[first]) {
                entry.1 = v;
            }
        }
        Object { entries }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// `d[key] = value`: replaces in place when the key exists, else appends. Linear in the
    /// object's size; use [`Object::from_pairs`] to build large objects.
    pub fn insert(&mut self, key: String, value: Value) {
        if let Some(entry) = self.entries.iter_mut().find(|(k, _)| *k == key) {
            entry.1 = value;
        } else {
            self.entries.push((key, value));
        }
    }

    /// Removes a key, returning its value (`d.pop(key, None)`).
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let index = self.entries.iter().position(|(k, _)| k == key)?;
        Some(self.entries.remove(index).1)
    }

    pub fn iter(&self) -> std::slice::Iter<'_, (String, Value)> {
        self.entries.iter()
    }

    pub fn into_pairs(self) -> Vec<(String, Value)> {
        self.entries
    }
}

impl<'a> IntoIterator for &'a Object {
    type Item = &'a (String, Value);
    type IntoIter = std::slice::Iter<'a, (String, Value)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter()
    }
}

impl FromIterator<(String, Value)> for Object {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        Object::from_pairs(iter.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(keys: &[&str]) -> Vec<(String, Value)> {
        keys.iter()
            .enumerate()
            .map(|(i, k)| (k.to_string(), Value::Int(i as i64)))
            .collect()
    }

    fn keys_and_values(o: &Object) -> Vec<(String, i64)> {
        o.iter()
            .map(|(k, v)| match v {
                Value::Int(i) => (k.clone(), *i),
                other => panic!("unexpected {other:?}"),
            })
            .collect()
    }

    #[test]
    fn duplicate_key_keeps_first_position_and_last_value() {
        let o = Object::from_pairs(pairs(&["a", "b", "a"]));
        assert_eq!(
            keys_and_values(&o),
            vec![("a".to_string(), 2), ("b".to_string(), 1)]
        );
    }

    #[test]
    fn duplicate_keys_in_large_object_use_the_same_rule() {
        let mut keys: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
        keys.push("k3".into());
        keys.push("k0".into());
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let o = Object::from_pairs(pairs(&refs));
        assert_eq!(o.len(), 20);
        assert_eq!(o.get("k3"), Some(&Value::Int(20)));
        assert_eq!(o.get("k0"), Some(&Value::Int(21)));
        assert_eq!(o.iter().next().map(|(k, _)| k.as_str()), Some("k0"));
    }

    #[test]
    fn truthiness_follows_python() {
        assert!(!Value::Null.is_truthy());
        assert!(!Value::Int(0).is_truthy());
        assert!(!Value::Float(-0.0).is_truthy());
        assert!(Value::Float(f64::NAN).is_truthy());
        assert!(!Value::Str(String::new()).is_truthy());
        assert!(Value::Str("0".into()).is_truthy());
        assert!(!Value::Array(vec![]).is_truthy());
        assert!(!Value::Object(Object::new()).is_truthy());
        assert!(Value::BigInt("99999999999999999999".into()).is_truthy());
    }
}
