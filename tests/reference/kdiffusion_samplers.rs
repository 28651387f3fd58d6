//! Which of Ember's samplers (with which options) reproduces each run of
//! `samplers_kdiffusion/runs`, from the k-diffusion or ComfyUI function and options it names.

use ember_tests::Json;
use inference::sampling::{Algorithm, AlgorithmOptions, UniPcFlavor, UniPcOptions, UniPcVariant};

/// The sampler (and its options) that reproduces a run, or `None` when Ember has none yet.
pub(crate) fn sampler_for(run: &Json) -> Option<(Algorithm, AlgorithmOptions)> {
    let options = &run["options"];
    let number = |key: &str, default: f32| options[key].as_f64().map_or(default, |v| v as f32);
    let chosen = AlgorithmOptions {
        eta: number("eta", 1.0),
        s_noise: number("s_noise", 1.0),
        s_churn: number("s_churn", 0.0),
        s_tmin: number("s_tmin", 0.0),
        // JSON has no infinity: the default `s_tmax` is written "inf".
        s_tmax: number("s_tmax", f32::INFINITY),
        sde_interval: run["sa_solver"]["tau_interval"].as_object().map(|t| {
            let get = |k: &str| t[k].as_f64().unwrap() as f32;
            (get("start_sigma"), get("end_sigma"))
        }),
    };
    if chosen.s_churn != 0.0 && run["sampler"] != "sample_euler" {
        return None;
    }
    let algorithm = match run["sampler"].as_str()? {
        "sample_euler" => Algorithm::Euler,
        "sample_euler_ancestral" => Algorithm::EulerAncestral,
        "sample_heun" => Algorithm::Heun,
        "sample_lms" if run["name"] == "lms" => Algorithm::Lms,
        "sample_dpmpp_2m" => Algorithm::DpmPp2M,
        "sample_dpm_2" => Algorithm::Dpm2,
        "sample_dpm_2_ancestral" => Algorithm::Dpm2Ancestral,
        "sample_dpmpp_2s_ancestral" => Algorithm::DpmPp2SAncestral,
        "sample_dpmpp_sde" => Algorithm::DpmPpSde,
        "sample_dpmpp_2m_sde" if options["solver_type"] == "heun" => Algorithm::DpmPp2MSdeHeun,
        "sample_dpmpp_2m_sde" => Algorithm::DpmPp2MSde,
        "sample_dpmpp_3m_sde" => Algorithm::DpmPp3MSde,
        "sample_ddpm" => Algorithm::Ddpm,
        "sample_lcm" => Algorithm::Lcm,
        "sample_ipndm" => Algorithm::Ipndm,
        "sample_ipndm_v" => Algorithm::IpndmV,
        "sample_res_multistep" => {
            return Some((
                Algorithm::ResMultistep,
                AlgorithmOptions { eta: 0.0, ..chosen },
            ));
        }
        "sample_res_multistep_ancestral" => Algorithm::ResMultistep,
        "sample_gradient_estimation" => Algorithm::GradientEstimation,
        "sample_er_sde" => Algorithm::ErSde,
        "sample_dpm_fast" => Algorithm::DpmFast,
        "sample_deis" => Algorithm::Deis,
        "sample_sa_solver" => Algorithm::SaSolver,
        "sample_euler_cfg_pp" => {
            return Some((
                Algorithm::EulerAncestralCfgPp,
                AlgorithmOptions {
                    eta: 0.0,
                    s_noise: 0.0,
                    ..chosen
                },
            ));
        }
        "sample_dpmpp_2m_cfg_pp" => Algorithm::DpmPp2MCfgPp,
        "sample_dpm_adaptive" => Algorithm::DpmAdaptive {
            order: options["order"].as_u64().unwrap_or(3) as u8,
        },
        "sample_unipc (variant bh1)" => Algorithm::UniPc(comfy_unipc(UniPcVariant::Bh1)),
        "sample_unipc_bh2" => Algorithm::UniPc(comfy_unipc(UniPcVariant::Bh2)),
        _ => return None,
    };
    Some((algorithm, chosen))
}

fn comfy_unipc(variant: UniPcVariant) -> UniPcOptions {
    UniPcOptions {
        variant,
        max_order: None,
        flavor: UniPcFlavor::Comfy,
    }
}
