// Formatting of API values for people.

export function age(iso, now = Date.now()) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '';
  let s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 60) return s + 's';
  const m = Math.floor(s / 60);
  if (m < 60) return m + 'm ' + (s % 60) + 's';
  const hr = Math.floor(m / 60);
  if (hr < 48) return hr + 'h ' + (m % 60) + 'm';
  return Math.floor(hr / 24) + 'd';
}

export function when(iso) {
  if (!iso || iso.startsWith('0001-')) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

// duration renders milliseconds for people: 850 ms, 4.2 s, 3 min 5 s,
// 2 h 10 min.
export function duration(ms) {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) return '';
  if (ms < 1000) return Math.round(ms) + ' ms';
  const s = ms / 1000;
  if (s < 60) return s.toFixed(1) + ' s';
  const m = Math.floor(s / 60);
  if (m < 60) return m + ' min ' + Math.round(s % 60) + ' s';
  return Math.floor(m / 60) + ' h ' + (m % 60) + ' min';
}

export function bytes(n) {
  if (typeof n !== 'number' || !Number.isFinite(n)) return '';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  // A no-break space: "64.0" and "GiB" on two lines read as two values.
  return (i === 0 ? n : n.toFixed(1)) + '\u00a0' + units[i];
}

// kv renders an object of strings as "k=v" lines.
export function kv(obj) {
  if (!obj || typeof obj !== 'object') return '';
  return Object.keys(obj).sort().map((k) => k + '=' + obj[k]).join('\n');
}

// networks renders {class: {ip, interface}} as "class ip (interface)".
export function networks(nets) {
  if (!nets || typeof nets !== 'object') return '';
  return Object.keys(nets).sort().map((c) => {
    const n = nets[c] || {};
    return c + ' ' + (n.ip || '') + (n.interface ? ' (' + n.interface + ')' : '');
  }).join('\n');
}

// factsSummary picks the facts an operator compares at a glance; every
// fact is still shown in full beside it.
export function factsSummary(f) {
  if (!f || typeof f !== 'object') return '';
  const parts = [];
  const cpus = f.cpus ?? f.cpuCount ?? (f.cpu && f.cpu.count);
  if (cpus !== undefined) parts.push(cpus + ' CPU');
  const mem = f.memoryBytes ?? (f.memory && f.memory.totalBytes);
  if (typeof mem === 'number') parts.push(bytes(mem));
  if (Array.isArray(f.disks)) parts.push(f.disks.length + (f.disks.length === 1 ? ' disk' : ' disks'));
  const nics = f.nics ?? f.interfaces;
  if (Array.isArray(nics)) parts.push(nics.length + (nics.length === 1 ? ' NIC' : ' NICs'));
  if (f.tpm !== undefined) parts.push(f.tpm ? 'TPM' : 'no TPM');
  if (f.arch) parts.push(f.arch);
  return parts.join(' · ');
}

export function factValue(v) {
  if (v === null || v === undefined) return '';
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}
