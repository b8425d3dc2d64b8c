//! The thread's key/value context.

use super::*;

impl Store<'_> {
    /// One context value.
    pub fn context_get(&self, key: &str) -> Result<Option<Value>, SqlError> {
        self.feature_exec("SELECT value FROM context WHERE key = ?", &[key.into()])?
            .first()
            .map(|r| serde_json::from_str(&r.text(0)?).map_err(|e| SqlError(e.to_string())))
            .transpose()
    }

    /// Sets a context value.
    pub fn context_set(&self, now: i64, key: &str, value: &Value) -> Result<(), SqlError> {
        self.feature_insert(
            Feature::Context,
            "INSERT INTO context (key, value, updated_at) VALUES (?, ?, ?)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            &[key.into(), value.to_string().into(), now.into()],
        )?;
        Ok(())
    }

    /// Removes a context value.
    pub fn context_remove(&self, key: &str) -> Result<(), SqlError> {
        self.feature_exec("DELETE FROM context WHERE key = ?", &[key.into()])?;
        Ok(())
    }

    /// The whole context.
    pub fn context_all(&self) -> Result<Map<String, Value>, SqlError> {
        let mut out = Map::new();
        for r in self.feature_exec("SELECT key, value FROM context ORDER BY key", &[])? {
            let value = serde_json::from_str(&r.text(1)?).map_err(|e| SqlError(e.to_string()))?;
            out.insert(r.text(0)?, value);
        }
        Ok(out)
    }
}
