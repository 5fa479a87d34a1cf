//! A BERT sentence model run in-process (candle, pure Rust, CPU): all-MiniLM-L6-v2 and models
//! of its kind, from a directory holding `config.json`, `tokenizer.json` and
//! `model.safetensors` (the files a sentence-transformers model ships). The vector of a text is
//! the mean of its tokens' last hidden states over the attention mask, L2-normalised: what
//! sentence-transformers computes for these models. No network, ever; the model files are the
//! operator's to supply.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use futures::future::BoxFuture;
use tokenizers::{PaddingParams, Tokenizer, TruncationParams};

use crate::{EmbedError, Embedder, normalize};

/// Tokens per text: longer texts are cut (all-MiniLM-L6-v2 was trained on at most 256; memory
/// chunks of ~1000 characters fit).
const MAX_TOKENS: usize = 256;
/// Texts run through the model at once.
const BATCH: usize = 16;

/// A sentence model in memory.
#[derive(Clone)]
pub struct LocalEmbedder {
    inner: Arc<Lazy>,
    name: String,
}

/// The model's directory and configuration, and the model once loaded (or why it cannot be).
struct Lazy {
    dir: PathBuf,
    config: Config,
    loaded: OnceLock<Result<Loaded, String>>,
}

struct Loaded {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("model", &self.name)
            .finish()
    }
}

fn model_error(what: impl std::fmt::Display) -> EmbedError {
    EmbedError::Model(what.to_string())
}

/// `dir/name`, which must exist.
fn file(dir: &Path, name: &str) -> Result<PathBuf, EmbedError> {
    let path = dir.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(model_error(format!(
            "{} is missing: the model directory needs config.json, tokenizer.json and model.safetensors",
            path.display()
        )))
    }
}

impl LocalEmbedder {
    /// The model in `dir`, checked (its three files exist, `config.json` is a BERT
    /// configuration) but loaded on first use: a start that never embeds (a one-shot command,
    /// `talon doctor`) does not read ~90 MB of weights. Its name (what [`Embedder::model`]
    /// says) is `local:` and the directory's name, or `name` when given.
    pub fn load(dir: &Path, name: Option<&str>) -> Result<Self, EmbedError> {
        let config = read_config(dir)?;
        file(dir, "tokenizer.json")?;
        file(dir, "model.safetensors")?;
        let name = match name {
            Some(n) => n.to_string(),
            None => format!(
                "local:{}",
                dir.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "model".into())
            ),
        };
        Ok(Self {
            inner: Arc::new(Lazy {
                dir: dir.to_path_buf(),
                config,
                loaded: OnceLock::new(),
            }),
            name,
        })
    }

    /// The vectors of `texts`, computed on this thread (a blocking call; the first loads the
    /// model, and a model that cannot be loaded says why at every call).
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let loaded = self
            .inner
            .loaded
            .get_or_init(|| Loaded::read(&self.inner.dir, &self.inner.config))
            .as_ref()
            .map_err(model_error)?;
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(BATCH) {
            out.extend(loaded.batch(batch).map_err(model_error)?);
        }
        Ok(out)
    }
}

fn read_config(dir: &Path) -> Result<Config, EmbedError> {
    let text = std::fs::read_to_string(file(dir, "config.json")?)
        .map_err(|e| model_error(format!("config.json: {e}")))?;
    serde_json::from_str(&text)
        .map_err(|e| model_error(format!("config.json is not a BERT configuration: {e}")))
}

impl Loaded {
    /// The tokenizer and the weights in `dir`.
    fn read(dir: &Path, config: &Config) -> Result<Self, String> {
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| format!("tokenizer.json: {e}"))?;
        tokenizer.with_padding(Some(PaddingParams::default()));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..TruncationParams::default()
            }))
            .map_err(|e| format!("tokenizer.json: {e}"))?;
        let weights = std::fs::read(dir.join("model.safetensors"))
            .map_err(|e| format!("model.safetensors: {e}"))?;
        let device = Device::Cpu;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
            .map_err(|e| format!("model.safetensors: {e}"))?;
        let model = BertModel::load(vb, config)
            .map_err(|e| format!("model.safetensors does not fit config.json: {e}"))?;
        Ok(Self {
            model,
            tokenizer,
            device,
        })
    }

    fn batch(
        &self,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, Box<dyn std::error::Error + Send + Sync>> {
        let encodings = self.tokenizer.encode_batch(texts.to_vec(), true)?;
        let rows = encodings.len();
        let width = encodings.first().map_or(0, |e| e.get_ids().len());
        let mut ids = Vec::with_capacity(rows * width);
        let mut mask = Vec::with_capacity(rows * width);
        for e in &encodings {
            ids.extend_from_slice(e.get_ids());
            mask.extend_from_slice(e.get_attention_mask());
        }
        let ids = Tensor::from_vec(ids, (rows, width), &self.device)?;
        let mask = Tensor::from_vec(mask, (rows, width), &self.device)?;
        let types = ids.zeros_like()?;
        let hidden = self.model.forward(&ids, &types, Some(&mask))?;
        // Mean over the real tokens: padding is masked out of both sum and count.
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?;
        let means = summed.broadcast_div(&counts)?;
        let mut vectors: Vec<Vec<f32>> = means.to_vec2()?;
        vectors.iter_mut().for_each(|v| normalize(v));
        Ok(vectors)
    }
}

impl Embedder for LocalEmbedder {
    fn model(&self) -> &str {
        &self.name
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        let this = self.clone();
        let texts = texts.to_vec();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || this.embed_blocking(&texts))
                .await
                .map_err(|e| model_error(format!("the model's thread stopped: {e}")))?
        })
    }
}
