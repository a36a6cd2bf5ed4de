// The list of open and upcoming sales: GET /.
import { t, setupSwitch, money, lang } from './i18n.js';
import { call } from './api.js';

let sales = null;

function render() {
  const list = document.getElementById('sales');
  const status = document.getElementById('status');
  if (sales === null) return;
  status.textContent = sales.length ? '' : t('list.none');
  const fmt = new Intl.DateTimeFormat(lang, { dateStyle: 'medium', timeStyle: 'short' });
  list.replaceChildren(...sales.map((s) => {
    const li = document.createElement('li');
    const a = document.createElement('a');
    a.href = '/sales/' + encodeURIComponent(s.id);
    const h = document.createElement('h2');
    h.textContent = s.title;
    const p = document.createElement('p');
    p.textContent = `${s.hotel} · ${s.room_type}`;
    const price = document.createElement('p');
    price.className = 'price';
    price.textContent = money(s.price, s.currency) + ' ';
    if (s.original_price > s.price) {
      const del = document.createElement('del');
      del.textContent = money(s.original_price, s.currency);
      price.append(del);
    }
    const when = document.createElement('p');
    when.className = 'when';
    when.textContent = s.status === 'upcoming' ? t('list.upcoming', { when: fmt.format(Date.parse(s.starts_at)) })
      : s.status === 'sold_out' ? t('list.sold_out') : s.status === 'paused' ? t('status.paused') : t('list.open');
    // The stay on sale, first night to check-out day: a card without it
    // made a guest open every sale to learn its dates.
    const stay = document.createElement('p');
    stay.className = 'stay-dates';
    const nights = s.nights || [];
    if (nights.length) {
      const day = new Intl.DateTimeFormat(lang, { weekday: 'short', month: 'short', day: 'numeric', timeZone: 'UTC' });
      const first = Date.parse(nights[0].date + 'T00:00:00Z');
      const last = Date.parse(nights[nights.length - 1].date + 'T00:00:00Z');
      if (s.kind === 'slot' || s.kind === 'seats') {
        // Time slots, departures: the first and last days with one, no check-out.
        const k = s.kind === 'seats' ? 'list.departures' : 'list.slots';
        stay.textContent = first === last ? t(k + '_one', { from: day.format(first) }) : t(k, { from: day.format(first), to: day.format(last) });
      } else {
        stay.textContent = t('list.stay', { from: day.format(first), to: day.format(last + 86400000) });
      }
      stay.dataset.from = nights[0].date;
    }
    a.append(h, p, stay, price, when);
    li.append(a);
    return li;
  }));
}

async function start() {
  setupSwitch(render);
  const res = await call('GET', '/api/sales');
  if (res.status !== 200) {
    document.getElementById('status').textContent = t('list.failed');
    return;
  }
  sales = res.body.sales.filter((s) => ['active', 'upcoming', 'sold_out', 'paused'].includes(s.status));
  render();
}

start();
