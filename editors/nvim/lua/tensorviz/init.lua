-- TensorViz for Neovim 0.10+: starts `tensorviz lsp` with the settings of
-- docs/editors.md, adds the :TensorViz* commands and a statusline function.
--
--   require("tensorviz").setup({ settings = { recaptureOnSave = true } })
--
-- See editors/nvim/README.md.
local M = {}

local defaults = {
  -- The server command; its last word "lsp" is replaced by "diff" for :TensorVizDiff.
  cmd = { "tensorviz", "lsp" },
  filetypes = { "python", "toml" },
  root_markers = { ".tensorviz", "pyproject.toml", ".git" },
  -- The `tensorviz` settings section (docs/editors.md, Settings).
  settings = {},
  -- Shapes at the end of each captured line.
  inlay_hints = true,
  -- Buffer-local keymaps (false: none).
  keymaps = {
    open = "<leader>tg",
    show_in_graph = "<leader>ts",
    cancel = "<leader>tc",
  },
}

M.config = vim.deepcopy(defaults)

-- Captures in progress, by client id and progress token: { title, message, percentage }.
local running = {}
-- The newest viewer URL the server opened (for :checkhealth tensorviz and :TensorVizShow).
M.last_viewer_url = nil
-- Browser opens the server asked for this session: how many, how many failed, the last
-- failure's words (for :checkhealth tensorviz).
M.browser_opens = { tried = 0, failed = 0, last_error = nil }

local function clients(bufnr)
  return vim.lsp.get_clients({ name = "tensorviz", bufnr = bufnr })
end

local function client_for(bufnr)
  local c = clients(bufnr)[1] or vim.lsp.get_clients({ name = "tensorviz" })[1]
  if not c then
    vim.notify("TensorViz: the language server is not running for this buffer", vim.log.levels.WARN)
  end
  return c
end

-- workspace/executeCommand; `on_result(err, result)` is optional.
function M.exec(command, arguments, bufnr, on_result)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local client = client_for(bufnr)
  if not client then return end
  local params = { command = command, arguments = arguments or {} }
  local handler = function(err, result)
    if err then
      vim.notify("TensorViz: " .. command .. ": " .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
    end
    if on_result then on_result(err, result) end
  end
  if vim.fn.has("nvim-0.11") == 1 then
    client:request("workspace/executeCommand", params, handler, bufnr)
  else
    client.request("workspace/executeCommand", params, handler, bufnr)
  end
end

local function folder_of(bufnr)
  local client = client_for(bufnr)
  if not client then return nil end
  local name = vim.api.nvim_buf_get_name(bufnr)
  for _, f in ipairs(client.workspace_folders or {}) do
    local dir = vim.uri_to_fname(f.uri)
    if name:sub(1, #dir + 1) == dir .. "/" then return dir end
  end
  return client.root_dir
end

-- The Open as Graph lens of the cursor: the one on the cursor's line, else the nearest
-- above it (the definition the cursor is in).
local function lens_at_cursor(bufnr, on_lens)
  local client = client_for(bufnr)
  if not client then return end
  local line = vim.api.nvim_win_get_cursor(0)[1] - 1
  local params = { textDocument = vim.lsp.util.make_text_document_params(bufnr) }
  local handler = function(err, lenses)
    if err or not lenses or #lenses == 0 then
      vim.notify("TensorViz: no model to open in this file (no Open as Graph lens)", vim.log.levels.WARN)
      return
    end
    local best
    for _, lens in ipairs(lenses) do
      local l = lens.range.start.line
      if l <= line and (not best or l > best.range.start.line) then best = lens end
    end
    on_lens(best or lenses[1])
  end
  if vim.fn.has("nvim-0.11") == 1 then
    client:request("textDocument/codeLens", params, handler, bufnr)
  else
    client.request("textDocument/codeLens", params, handler, bufnr)
  end
end

function M.open(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  lens_at_cursor(bufnr, function(lens)
    M.exec(lens.command.command, lens.command.arguments, bufnr)
  end)
end

function M.show_in_graph(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local line = vim.api.nvim_win_get_cursor(0)[1] - 1
  M.exec("tensorviz.showInGraph", { { uri = vim.uri_from_bufnr(bufnr), line = line } }, bufnr)
end

function M.cancel(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  M.exec("tensorviz.cancelCapture", { { folder = folder_of(bufnr) } }, bufnr)
end

function M.trust(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  M.exec("tensorviz.trustWorkspace", { { folder = folder_of(bufnr) } }, bufnr)
end

-- The profile's previous capture against its newest (`tensorviz diff --profile`), in a
-- scratch buffer. No profile: the one the cursor's lens names.
function M.diff(profile, bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local folder = folder_of(bufnr)
  local function run(name)
    local argv = vim.deepcopy(M.config.cmd)
    if argv[#argv] == "lsp" then table.remove(argv) end
    vim.list_extend(argv, { "diff", "--profile", name })
    vim.system(argv, { cwd = folder, text = true }, vim.schedule_wrap(function(res)
      local text = (res.stdout or "") .. (res.stderr or "")
      vim.cmd("botright new")
      local buf = vim.api.nvim_get_current_buf()
      vim.bo[buf].buftype, vim.bo[buf].bufhidden, vim.bo[buf].swapfile = "nofile", "wipe", false
      vim.api.nvim_buf_set_name(buf, "tensorviz-diff://" .. name)
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(text, "\n", { trimempty = true }))
      vim.bo[buf].modifiable = false
      M.last_diff = { profile = name, code = res.code, text = text }
    end))
  end
  if profile and profile ~= "" then return run(profile) end
  lens_at_cursor(bufnr, function(lens)
    local arg = (lens.command.arguments or {})[1] or {}
    if not arg.profile then
      vim.notify("TensorViz: this model has no saved profile yet: Open as Graph first", vim.log.levels.WARN)
      return
    end
    run(arg.profile)
  end)
end

-- The current capture's stage for a statusline, e.g.
-- "TensorViz: capturing GPT · running the forward (12 s)"; "" when none runs.
function M.statusline()
  local newest
  for _, tokens in pairs(running) do
    for _, p in pairs(tokens) do
      if not newest or p.seq > newest.seq then newest = p end
    end
  end
  if not newest then return "" end
  local text = newest.title
  if newest.message and newest.message ~= "" then text = text .. " · " .. newest.message end
  return text
end

local seq = 0
local function on_progress(ev)
  local data = ev.data or {}
  local client = vim.lsp.get_client_by_id(data.client_id)
  if not client or client.name ~= "tensorviz" then return end
  local params = data.params or {}
  local value = params.value or {}
  local tokens = running[data.client_id] or {}
  running[data.client_id] = tokens
  if value.kind == "end" then
    tokens[params.token] = nil
  else
    local p = tokens[params.token] or { title = value.title or "TensorViz" }
    seq = seq + 1
    p.seq = seq
    if value.message then p.message = value.message end
    p.percentage = value.percentage or p.percentage
    tokens[params.token] = p
  end
  vim.cmd("redrawstatus")
end

-- window/showDocument: Neovim's own handler (vim.ui.open for an external URL), with the
-- URL kept and whether the browser opened counted.
function M.show_document(err, params, ctx, cfg)
  local result = vim.lsp.handlers["window/showDocument"](err, params, ctx, cfg)
  if params and params.external then
    M.last_viewer_url = params.uri
    local opens = M.browser_opens
    opens.tried = opens.tried + 1
    if type(result) ~= "table" or result.success ~= true then
      opens.failed = opens.failed + 1
      local e = type(result) == "table" and result.error or nil
      opens.last_error = (e and e.message and tostring(e.message) ~= "" and tostring(e.message)) or "no browser opened"
    end
  end
  return result
end

-- :TensorVizShow: the graph the server last opened, in the browser again (its URL in a
-- message where no browser opens).
function M.show()
  local url = M.last_viewer_url
  if not url then
    vim.notify("TensorViz: no graph opened yet in this session (:TensorVizOpen)", vim.log.levels.WARN)
    return
  end
  local cmd, err = vim.ui.open(url)
  local ret = cmd and cmd:wait(2000) or nil
  if ret == nil or ret.code ~= 0 then
    vim.notify(("TensorViz: no browser opened (%s); the graph is at %s"):format(
      (ret and ret.stderr ~= "" and ret.stderr) or err or "vim.ui.open failed", url), vim.log.levels.WARN)
  end
end

local function handlers()
  return {
    -- Neovim has no handler for workspace/codeLens/refresh: lens titles follow profiles.
    ["workspace/codeLens/refresh"] = function()
      vim.lsp.codelens.refresh()
      return vim.NIL
    end,
    ["window/showDocument"] = M.show_document,
  }
end

local function on_attach(client, bufnr)
  vim.lsp.codelens.refresh({ bufnr = bufnr })
  if M.config.inlay_hints then vim.lsp.inlay_hint.enable(true, { bufnr = bufnr }) end
  vim.api.nvim_create_autocmd({ "BufEnter", "InsertLeave", "TextChanged" }, {
    buffer = bufnr,
    group = vim.api.nvim_create_augroup("tensorviz_lens_" .. bufnr, { clear = true }),
    callback = function() vim.lsp.codelens.refresh({ bufnr = bufnr }) end,
  })
  local keys = M.config.keymaps
  if keys then
    local function map(lhs, fn, desc)
      if lhs then vim.keymap.set("n", lhs, fn, { buffer = bufnr, desc = "TensorViz: " .. desc }) end
    end
    map(keys.open, M.open, "Open as Graph")
    map(keys.show_in_graph, M.show_in_graph, "Show in Graph")
    map(keys.cancel, M.cancel, "cancel the running capture")
  end
end

local function server_config()
  local cfg = M.config
  return {
    name = "tensorviz",
    cmd = cfg.cmd,
    filetypes = cfg.filetypes,
    root_markers = cfg.root_markers,
    settings = { tensorviz = cfg.settings },
    init_options = { tensorviz = cfg.settings },
    capabilities = { workspace = { codeLens = { refreshSupport = true } } },
    handlers = handlers(),
    on_attach = on_attach,
  }
end

local function user_commands()
  local cmd = vim.api.nvim_create_user_command
  cmd("TensorVizOpen", function() M.open() end, { desc = "TensorViz: Open as Graph (the model at the cursor)" })
  cmd("TensorVizShowInGraph", function() M.show_in_graph() end, { desc = "TensorViz: show the cursor's line in the graph" })
  cmd("TensorVizCancel", function() M.cancel() end, { desc = "TensorViz: cancel this folder's running capture" })
  cmd("TensorVizShow", function() M.show() end, { desc = "TensorViz: show the last graph in the browser again" })
  cmd("TensorVizTrust", function() M.trust() end, { desc = "TensorViz: trust this workspace folder (captures run its code)" })
  cmd("TensorVizDiff", function(o) M.diff(o.args) end,
    { nargs = "?", desc = "TensorViz: the profile's previous capture against its newest" })
end

function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(defaults), opts or {})
  user_commands()
  vim.api.nvim_create_autocmd("LspProgress", {
    group = vim.api.nvim_create_augroup("tensorviz_progress", { clear = true }),
    callback = on_progress,
  })
  vim.api.nvim_create_autocmd("LspDetach", {
    group = vim.api.nvim_create_augroup("tensorviz_detach", { clear = true }),
    callback = function(ev)
      local client = vim.lsp.get_client_by_id(ev.data.client_id)
      if client and client.name == "tensorviz" then running[ev.data.client_id] = nil end
    end,
  })
  local config = server_config()
  if vim.fn.has("nvim-0.11") == 1 and vim.lsp.config then
    vim.lsp.config("tensorviz", config)
    vim.lsp.enable("tensorviz")
  else
    vim.api.nvim_create_autocmd("FileType", {
      group = vim.api.nvim_create_augroup("tensorviz_start", { clear = true }),
      pattern = config.filetypes,
      callback = function(args)
        local start = vim.deepcopy(config)
        start.root_dir = vim.fs.root(args.buf, config.root_markers)
        start.on_attach, start.handlers = config.on_attach, config.handlers
        vim.lsp.start(start, { bufnr = args.buf })
      end,
    })
  end
end

return M
