"""The similarity check: a risk per asset and agency, against the batch and everything uploaded there before.

Run by the pack stage once every asset is packed (its looks are in the pack
manifest, taken from the preview: no decode of its own). Per asset: its
signature (looks, title, first ten keywords, ``tasks.images.likeness``) is
added to the portfolio (``tasks.stores.portfolio``), then compared, through
the portfolio's index, with the batch and with every asset the ledger says
was uploaded to any of the run's agencies. Per agency the asset's risk is its
best score with an asset of the batch or one uploaded to that agency; pairs at
or above the agency's threshold (``[similarity] threshold`` of its spec) join
their assets into one group, transitively.

Before any group is made, copies of one picture however it was saved
(re-encoded, another format, scaled, other metadata; :func:`duplicates`, the
line measured by ``bench.duplicate_bench``) are one asset: the one uploaded
before (else the first by name) is kept, the others held back as
``duplicate`` at every agency, never counted as versions.

The agency's ``[similarity] action`` decides: ``warn`` shows the risk only;
``hold_back`` takes ``image.max_versions_per_motif`` of a group (with no
cap it only warns) — those already uploaded there first, then the others in
name order — and holds back the rest for that agency only, unless the
contributor released the asset (``tasks.stores.similar_risks``). Every risk
is written to ``reports/similarity.json`` for the review form, ``batch-assets``
and the summary.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from tasks.agencies.catalog import Catalog, catalog
from tasks.agencies.spec import SimilarityPolicy
from tasks.core.errors import BadInput
from tasks.core.records import CLIP_EXTENSIONS, Sidecar, read_sidecar
from tasks.core.reports import PackReport
from tasks.core.workdir import Workdir
from tasks.images.inspect import ImageRules, image_rules
from tasks.images.likeness import Likeness, Signature, looks_close, named_alike
from tasks.images.similar import Looks, same_picture
from tasks.stores.ledger import Ledger
from tasks.stores.portfolio import SignatureIndex, add_to_portfolio, portfolio_thumb, read_portfolio
from tasks.stores.similar_risks import Risk, read_risks, record_release, released, write_risks

log = logging.getLogger(__name__)


def batch_signatures(names: list[str], entries: Mapping[str, dict], sidecars: Mapping[str, Sidecar]) -> list[Signature]:
    """The signature of each packed asset: looks from its manifest entry, title and keywords from its sidecar."""
    out = []
    for name in names:
        entry, looks = entries[name], Looks.from_manifest(entries[name])
        if looks is None:  # packed before the looks were kept and not packed again: nothing to compare
            continue
        md = sidecars[name].metadata if name in sidecars else None
        out.append(Signature(name, entry["source"]["sha256"], looks, md.title if md else "",
                             tuple(md.keywords) if md else ()))
    return out


def similarity_policies(known: Catalog, agencies: list[str]) -> dict[str, SimilarityPolicy]:
    """agency -> its ``[similarity]`` policy in ``known`` (the run's catalog); the default for an unknown one."""
    return {a: known.specs[a].similarity if a in known.specs else SimilarityPolicy() for a in agencies}


class _Groups:
    """Union-find over asset content ids."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def root(self, x: str) -> str:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def join(self, a: str, b: str) -> None:
        ra, rb = self.root(a), self.root(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def duplicates(wd: Workdir, batch: list[Signature], matches: Mapping[str, list[tuple[Signature, Likeness]]],
               sent: set[str]) -> dict[str, Signature]:
    """name -> the asset a ``batch`` asset is a duplicate of: the same picture however it was saved (re-encoded,
    another format, scaled, other metadata; a clip: the same frames), of the batch or uploaded before (content ids
    in ``sent``), so one asset for every agency. Of each set of copies one uploaded before is kept, else the
    first by name. Only pairs whose looks are close (``likeness.looks_close``) have their pictures compared: the
    portfolio's kept thumbnails (``similar.same_picture``), each decoded once."""
    in_batch = {x.sha256 for x in batch}
    thumbs: dict[str, Image.Image | None] = {}

    def thumb(x: Signature) -> Image.Image | None:
        if x.sha256 not in thumbs:
            try:
                with Image.open(portfolio_thumb(wd, x.sha256)) as im:
                    thumbs[x.sha256] = im.convert("RGB")
            except (OSError, UnidentifiedImageError) as exc:  # its thumbnail could not be made: compared by nothing
                log.warning("%s: not compared picture by picture: %s", x.name, exc)
                thumbs[x.sha256] = None
        return thumbs[x.sha256]

    def same(a: Signature, b: Signature) -> bool:
        if a.is_clip or b.is_clip:  # the digest of their sampled frames' pixels, from their signatures
            return bool(a.digest) and a.digest == b.digest
        ta, tb = thumb(a), thumb(b)
        return ta is not None and tb is not None and same_picture(ta, tb)

    # Grouped, not pair by pair: each asset's nearest matches are a few, and among a thousand copies of one
    # picture they were its own copies, so pairs made two duplicates and left 998 copies as neither duplicates
    # nor versions (all sent to Adobe; bench.cluster_accounts, 2026-12-03).
    groups, signatures = _Groups(), {x.sha256: x for x in batch}
    for s in batch:
        for o, like in matches.get(s.sha256, []):
            # by content, not name: a re-export under the name of an upload whose file has left the batch is one too
            if (o.sha256 in in_batch or o.sha256 in sent) and o.sha256 != s.sha256 and looks_close(like) and same(s, o):
                groups.join(s.sha256, o.sha256)
                signatures[o.sha256] = o
    copies: dict[str, list[Signature]] = {}
    for sha in groups.parent:
        copies.setdefault(groups.root(sha), []).append(signatures[sha])
    found: dict[str, Signature] = {}
    for group in copies.values():
        kept, *others = sorted(group, key=lambda x: (x.sha256 not in sent, x.name))
        for x in others:
            if x.sha256 in in_batch:
                found[x.name] = kept
    return found


def same_words(batch: list[Signature]) -> dict[str, str]:
    """name -> an earlier asset (by name) of ``batch`` named alike (``likeness.named_alike``: the same title words,
    nearly the same first ten keywords), a series reviewers read as spam whatever the pictures."""
    by_title: dict[frozenset[str], list[Signature]] = {}
    for s in sorted(batch, key=lambda x: x.name):
        if s.title_words:
            by_title.setdefault(s.title_words, []).append(s)
    found: dict[str, str] = {}
    for series in by_title.values():
        for i, s in enumerate(series):
            first = next((o for o in series[:i] if named_alike(s, o)), None)
            if first is not None:
                found[s.name] = first.name
    return found


def assess_similarity(wd: Workdir, batch: list[Signature], rules: list[ImageRules], already_held: Mapping[str, set],
                      same_motif_bits: int, policies: Mapping[str, SimilarityPolicy] | None = None,
                      thumbs: Callable[[str], Path] | None = None) -> dict[str, dict[str, Risk]]:
    """agency -> asset name -> its risk and outcome, for every asset of ``batch`` and agency of ``rules``.

    ``already_held`` (agency -> names) are held back there by another rule: they count in no group's cap.
    Images are compared with images and clips with clips (``batch`` is one kind): of the portfolio, only the
    uploaded assets of the batch's kind. ``thumbs``: where the batch's thumbnails are (the portfolio keeps a copy).
    """
    policies = policies if policies is not None else similarity_policies(catalog(wd), [r.agency for r in rules])
    portfolio = add_to_portfolio(wd, read_portfolio(wd), batch, thumbs)
    ledger = Ledger(wd.ledger).read()
    done = {r.agency: ledger.done_for(r.agency) for r in rules}
    in_batch = {s.sha256 for s in batch}
    uploaded_anywhere = set().union(*done.values()) if done else set()
    clips = any(s.is_clip for s in batch)
    earlier = [s for sha, s in portfolio.items()
               if sha in uploaded_anywhere and sha not in in_batch and s.is_clip == clips]
    index = SignatureIndex([*batch, *earlier])
    lowest = min((p.threshold for p in policies.values()), default=1.0)
    matches: dict[str, list[tuple[Signature, Likeness]]] = {
        s.sha256: index.nearest(s, lowest, same_motif_bits) for s in batch}
    dupes = duplicates(wd, batch, matches, uploaded_anywhere)
    series = same_words(batch)
    releases = released(wd)
    out: dict[str, dict[str, Risk]] = {}
    for rule in rules:
        policy, sent = policies[rule.agency], done[rule.agency]
        groups = _Groups()
        best: dict[str, tuple[Signature, Likeness] | None] = {}
        for s in batch:  # a duplicate is no version: it joins no group and counts in no cap
            allowed = [(o, like) for o, like in matches[s.sha256] if (o.sha256 in in_batch or o.sha256 in sent)
                       and o.name not in dupes and s.name not in dupes]
            best[s.name] = allowed[0] if allowed else None
            for o, like in allowed:
                if like.score >= policy.threshold:
                    groups.join(s.sha256, o.sha256)
        members: dict[str, list[Signature]] = {}
        names = {s.sha256: s for s in [*batch, *earlier]}
        for sha in groups.parent:
            members.setdefault(groups.root(sha), []).append(names[sha])
        held = already_held.get(rule.agency, set())
        cap = rule.max_versions if policy.action == "hold_back" else None
        outcome: dict[str, str] = {}
        for group in members.values():
            if len(group) < 2:
                continue
            uploaded = [g for g in group if g.sha256 in sent]
            waiting = sorted((g for g in group if g.sha256 not in sent and g.name not in held), key=lambda g: g.name)
            for n, g in enumerate(waiting):
                if cap is None:
                    outcome[g.name] = "warned"
                elif n >= cap - len(uploaded):
                    outcome[g.name] = "released" if (rule.agency, g.sha256) in releases else "held back"
        per: dict[str, Risk] = {}
        for s in batch:
            if s.name in dupes:
                original = dupes[s.name]
                per[s.name] = Risk(1.0, original.name, original.sha256, original.sha256 in sent,
                                   "the same frames" if s.is_clip else "the same picture", 1, original.name,
                                   "duplicate", policy.threshold)
                continue
            near, group = best[s.name], members.get(groups.root(s.sha256), [s])
            per[s.name] = Risk(round(near[1].score, 3) if near else 0.0, near[0].name if near else "",
                               near[0].sha256 if near else "", bool(near) and near[0].sha256 in sent,
                               near[1].why() if near else "", len(group), min(g.name for g in group),
                               outcome.get(s.name, ""), policy.threshold, series.get(s.name, ""))
        out[rule.agency] = per
    return out


def hold_back_similar(wd: Workdir, report: PackReport, entries: Mapping[str, dict], sidecars: Mapping[str, Sidecar],
                      rules: list[ImageRules], same_motif_bits: int,
                      policies: Mapping[str, SimilarityPolicy] | None = None) -> dict[str, dict[str, Risk]]:
    """The pack stage's check: risks of the ready assets written, versions beyond a cap held back in ``report``."""
    batch = batch_signatures(sorted(report.ready), entries, sidecars)
    already = {a: set(held) for a, held in report.held_back.items()}
    risks = assess_similarity(wd, batch, rules, already, same_motif_bits, policies)
    caps = {r.agency: r.max_versions for r in rules}
    for agency, per in risks.items():
        for name, risk in per.items():
            why = held_reason(name, agency, risk, caps[agency])
            if why is not None:
                held = report.duplicate_held if risk.outcome == "duplicate" else report.similar_held
                held.setdefault(agency, set()).add(name)
                report.held_back.setdefault(agency, {})[name] = why
    named_alike_to = {name: r.same_words_as for per in risks.values() for name, r in per.items() if r.same_words_as}
    for name, first in sorted(named_alike_to.items()):
        log.warning("%s has the title and nearly the first ten keywords of %s, on another image: reviewers read a "
                    "series named alike as spam; `microstock similar distinct %s` sets it apart", name, first, name)
    _write_kind(wd, risks, clips=False)
    report.risks = risks
    return risks


def _is_clip(name: str) -> bool:
    return Path(name).suffix.lower() in CLIP_EXTENSIONS


def _write_kind(wd: Workdir, risks: dict[str, dict[str, Risk]], clips: bool) -> None:
    """``reports/similarity.json`` with these risks of one kind (the images', from the pack stage, or the clips',
    from the clips stage) and the other kind's as the file had them."""
    merged = {a: {n: r for n, r in per.items() if _is_clip(n) != clips} for a, per in read_risks(wd).items()}
    for agency, per in risks.items():
        merged.setdefault(agency, {}).update(per)
    write_risks(wd, {a: per for a, per in merged.items() if per})


def held_reason(name: str, agency: str, risk: Risk, cap: int | None) -> str | None:
    """Why the similarity check holds ``name`` back at ``agency`` (its words for the reports), None when it does not."""
    if risk.outcome == "duplicate":
        if _is_clip(name):
            return (f"a duplicate of {risk.nearest}: the same frames in another file (another encoding, or a copy "
                    "with other metadata); one asset, sent once, never counted as a version")
        return (f"a duplicate of {risk.nearest}: the same picture in another file (re-encoded, another format, "
                "scaled, or with other metadata); one asset, sent once, never counted as a version")
    if risk.outcome == "held back":
        return (f"one of {risk.versions} versions of one motif (with {risk.motif}); "
                f"{agency} takes at most {cap} per motif; closest: {risk.nearest} "
                f"(score {risk.score:.2f}: {risk.why}) — `microstock similar release {name} --agency {agency}` "
                "sends it anyway")
    return None


def hold_back_similar_clips(wd: Workdir, batch: list[Signature], agencies: list[str],
                            held_back: dict[str, dict[str, str]], same_motif_bits: int,
                            thumbs: Callable[[str], Path], known: Catalog | None = None) -> dict[str, dict[str, Risk]]:
    """The clips stage's check: the clips of ``batch`` compared with each other and with the clips uploaded
    before, with the images' scoring and rules (each agency's ``[similarity]`` and ``max_versions_per_motif``);
    a clip held back gets its reason in ``held_back`` (agency -> clip -> why, those held by a video rule kept)."""
    if not batch:  # no clips: nothing to compare (the portfolio is not read), the clips' old risks dropped
        if any(_is_clip(n) for per in read_risks(wd).values() for n in per):
            _write_kind(wd, {}, clips=True)
        return {}
    known = known or catalog(wd)
    rules = [image_rules(a, wd, known) for a in agencies]
    risks = assess_similarity(wd, batch, rules, {a: set(h) for a, h in held_back.items()}, same_motif_bits,
                              similarity_policies(known, agencies), thumbs=thumbs)
    caps = {r.agency: r.max_versions for r in rules}
    for agency, per in risks.items():
        for name, risk in per.items():
            why = held_reason(name, agency, risk, caps[agency])
            if why is not None:
                held_back.setdefault(agency, {}).setdefault(name, why)
    _write_kind(wd, risks, clips=True)
    return risks


def release_held_back(wd: Workdir, name: str, agencies: list[str] | None = None) -> list[str]:
    """Release ``name`` for ``agencies`` (default: those where the last check held it back); the agencies
    newly released. The next run sends it there however alike it is (until its image changes).

    Raises BadInput when ``name`` is no described asset of the workdir.
    """
    sidecar = read_sidecar(wd.sidecar(name))
    if sidecar is None or sidecar.name != name:
        raise BadInput(name, f"no described asset {name} in {wd.assets}")
    sha = sidecar.asset_id
    if agencies is None:
        agencies = sorted(a for a, per in read_risks(wd).items() if name in per and per[name].outcome == "held back")
    return [a for a in agencies if record_release(wd, a, name, sha)]
